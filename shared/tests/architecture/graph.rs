//! The checks over a graph of modules: layers and circles.

use std::collections::{BTreeMap, BTreeSet};

use crate::{Graph, Module};

/// The file graph seen from above: each file becomes the group `group` puts it in (none:
/// left out), uses inside a group dropped.
pub fn collapse(files: &Graph, group: impl Fn(&Module) -> Option<String>) -> Graph {
    let mut graph = Graph::new();
    for (from, targets) in files {
        let Some(from) = group(from) else { continue };
        let entry = graph.entry(vec![from.clone()]).or_default();
        entry.extend(
            targets
                .iter()
                .filter_map(&group)
                .filter(|to| *to != from)
                .map(|to| vec![to]),
        );
    }
    graph
}

pub fn names(modules: &BTreeSet<Module>) -> Vec<String> {
    modules.iter().map(|m| m.join("::")).collect()
}

/// The uses in `graph` of a higher layer than the user's, and of one of the `independent`
/// modules by another.
pub fn upward(graph: &Graph, layers: &[&[&str]], independent: &[&str]) -> Vec<String> {
    let rank = |module: &Module| {
        let name = module.join("::");
        layers
            .iter()
            .position(|layer| layer.contains(&name.as_str()))
            .unwrap_or_else(|| {
                panic!(
                    "`{name}` is in no layer: add it to the test's layers and docs/architecture.md"
                )
            })
    };
    let mut found = Vec::new();
    for (from, targets) in graph {
        let apart = |to: &Module| {
            [from, to]
                .iter()
                .all(|m| independent.contains(&m.join("::").as_str()))
        };
        for to in targets
            .iter()
            .filter(|to| rank(to) < rank(from) || apart(to))
        {
            found.push(format!("{} -> {}", from.join("::"), to.join("::")));
        }
    }
    found
}

/// Every set of two or more nodes that reach each other (Tarjan's strongly connected
/// components), each sorted.
pub fn circles(graph: &Graph) -> Vec<Vec<String>> {
    struct Tarjan<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g Module, usize>,
        low: BTreeMap<&'g Module, usize>,
        stack: Vec<&'g Module>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, node: &'g Module) {
            let i = self.index.len();
            self.index.insert(node, i);
            self.low.insert(node, i);
            self.stack.push(node);
            for next in self.graph.get(node).into_iter().flatten() {
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.stack.contains(&next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    component.push(top.join("::"));
                    if top == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut tarjan = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !tarjan.index.contains_key(node) {
            tarjan.visit(node);
        }
    }
    tarjan.found
}
