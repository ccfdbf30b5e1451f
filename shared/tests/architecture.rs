//! The library's layers, checked from its source: every `crate::` path a module uses must
//! point to its own layer or one below (docs/architecture.md), and no two top-level modules
//! may reach each other, however indirectly. Test modules (`#[cfg(test)]`) are left out.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::Path,
};

/// Top to bottom, as in docs/architecture.md. A module may use its own layer and those below.
const LAYERS: &[&[&str]] = &[
    &["http", "operations", "aws"],
    &["pipeline"],
    &["config"],
    &["evaluate", "db"],
    &["secret", "telemetry", "tls"],
    &["domain"],
];

type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn no_module_reaches_a_higher_layer_and_there_is_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = crate_graph(&src);
    // `cargo test --test architecture -- --nocapture` prints the graph.
    for (from, targets) in &graph {
        println!(
            "{from} -> {}",
            Vec::from_iter(targets.iter().cloned()).join(", ")
        );
    }
    let rank = |module: &str| {
        LAYERS
            .iter()
            .position(|layer| layer.contains(&module))
            .unwrap_or_else(|| {
                panic!("`{module}` is in no layer: add it to LAYERS and docs/architecture.md")
            })
    };
    let mut upward = Vec::new();
    for (from, targets) in &graph {
        for to in targets {
            if rank(to) < rank(from) {
                upward.push(format!("{from} -> {to}"));
            }
        }
    }
    assert!(upward.is_empty(), "uses of a higher layer: {upward:?}");
    assert_eq!(circles(&graph), Vec::<Vec<String>>::new(), "module circles");
}

#[test]
fn the_reader_sees_grouped_and_nested_imports_and_finds_a_circle() {
    let a = "use crate::{\n    b::{x, y},\n    c,\n};\n// crate::d in a comment\nfn f() { crate::e::g(); }\n";
    assert_eq!(
        dependencies(a),
        BTreeSet::from(["b", "c", "e"].map(String::from))
    );
    let test_only = "use crate::b;\n#[cfg(test)]\nmod tests {\n    use crate::c;\n}\n";
    assert_eq!(dependencies(test_only), BTreeSet::from(["b".to_string()]));
    let graph = Graph::from([
        ("a".into(), BTreeSet::from(["b".into()])),
        ("b".into(), BTreeSet::from(["c".into()])),
        ("c".into(), BTreeSet::from(["a".into()])),
        ("d".into(), BTreeSet::from(["a".into()])),
    ]);
    assert_eq!(circles(&graph), vec![vec!["a", "b", "c"]]);
}

/// Top-level module → the other top-level modules its files use.
fn crate_graph(src: &Path) -> Graph {
    let mut graph = Graph::new();
    for file in rust_files(src) {
        let relative = file.strip_prefix(src).unwrap();
        let first = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" {
            continue;
        }
        let uses = dependencies(&fs::read_to_string(&file).unwrap());
        let entry = graph.entry(module.clone()).or_default();
        entry.extend(uses.into_iter().filter(|m| *m != module));
    }
    graph
}

fn rust_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The first segment of every `crate::` path in `source`, outside comments and test modules.
fn dependencies(source: &str) -> BTreeSet<String> {
    let code: String = source
        .split("#[cfg(test)]")
        .next()
        .unwrap()
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            found.extend(group_heads(group));
        } else {
            found.insert(identifier(rest));
        }
    }
    // `crate::Result` and `crate::Error` are the domain's, re-exported at the root.
    found
        .into_iter()
        .filter(|m| !m.is_empty())
        .map(|m| match m.as_str() {
            "Result" | "Error" => "domain".to_string(),
            _ => m,
        })
        .collect()
}

/// The first segment of each item of a `{...}` group, up to its closing brace.
fn group_heads(group: &str) -> Vec<String> {
    let (mut depth, mut heads, mut at_item_start) = (0, Vec::new(), true);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => at_item_start = true,
            c if at_item_start && !c.is_whitespace() => {
                heads.push(identifier(&group[i..]));
                at_item_start = false;
            }
            _ => {}
        }
    }
    heads
}

fn identifier(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Every set of two or more modules that reach each other (Tarjan's strongly connected
/// components), each sorted.
fn circles(graph: &Graph) -> Vec<Vec<String>> {
    struct Tarjan<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, node: &'g str) {
            let i = self.index.len();
            self.index.insert(node, i);
            self.low.insert(node, i);
            self.stack.push(node);
            for next in self.graph.get(node).into_iter().flatten() {
                let next = next.as_str();
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
                    component.push(top.to_string());
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
        if !tarjan.index.contains_key(node.as_str()) {
            tarjan.visit(node);
        }
    }
    tarjan.found
}
