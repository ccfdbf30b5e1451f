//! The library's shape, checked from its source (docs/architecture.md): every path a file
//! uses (`crate::`, `super::`, `self::`, and the modules those bring into scope) must point
//! to its own layer or one below, at the top level and inside `pipeline/`; no two files
//! reach each other, however indirectly (a module and its own children aside); no file is
//! over [`MAX_LINES`]. Every line of every file is read except the test items themselves
//! (`#[cfg(test)]` items and the files they declare).

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::Path,
};

/// Top to bottom, as in docs/architecture.md. A module may use its own layer and those below.
const LAYERS: &[&[&str]] = &[
    &["http", "operations"],
    &["quality"],
    &["aws"],
    &["pipeline"],
    &["config"],
    &["providers", "db"],
    &["secret", "telemetry", "tls"],
    &["domain"],
];

/// Inside `pipeline/`, top to bottom: the runners, the steps a ticket goes through, the
/// ledger of calls (which records a claimed job's call), the outbox's machinery and the
/// invocation loop, the limits and switches they consult.
const PIPELINE_LAYERS: &[&[&str]] = &[
    &["sweep", "worker", "delivery"],
    &[
        "ingest",
        "batch_tier",
        "cascade",
        "erase",
        "feedback",
        "reads",
        "turn",
    ],
    &["ledger"],
    &["invocation", "outbox"],
    &["limits", "pause", "prompt_registry"],
];

/// The runners of `pipeline/` share nothing with each other but what the layers below hold.
const RUNNERS: &[&str] = &["sweep", "worker", "delivery"];

/// Past this a file is split by what its parts are about.
const MAX_LINES: usize = 450;

/// A module's path inside the crate: `pipeline/outbox/claim.rs` is `["pipeline", "outbox",
/// "claim"]`, a `mod.rs` is its folder's, `lib.rs` is `[]`.
type Module = Vec<String>;
type Graph = BTreeMap<Module, BTreeSet<Module>>;

#[test]
fn no_module_reaches_a_higher_layer_and_there_is_no_circle() {
    let library = Library::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let files = library.file_graph();
    let top = collapse(&files, |m| m.first().cloned());
    let pipeline = collapse(&files, |m| match m.as_slice() {
        [p, sub, ..] if p == "pipeline" => Some(sub.clone()),
        _ => None,
    });
    // `cargo test --test architecture -- --nocapture` prints both graphs.
    for (from, to) in top.iter().chain(&pipeline) {
        println!("{} -> {}", from.join("::"), names(to).join(", "));
    }
    let mut problems = Vec::new();
    let mut report = |what: &str, found: Vec<String>| {
        problems.extend(found.into_iter().map(|f| format!("{what}: {f}")));
    };
    report("a higher layer", upward(&top, LAYERS, &[]));
    report(
        "a higher layer inside pipeline/",
        upward(&pipeline, PIPELINE_LAYERS, RUNNERS),
    );
    report("a module circle", joined(circles(&top)));
    report("a circle inside pipeline/", joined(circles(&pipeline)));
    report("a file circle", joined(circles(&files)));
    report(
        &format!("over {MAX_LINES} lines"),
        library
            .files
            .iter()
            .filter(|(_, file)| file.lines > MAX_LINES)
            .map(|(module, file)| format!("{} ({} lines)", module.join("::"), file.lines))
            .collect(),
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn joined(circles: Vec<Vec<String>>) -> Vec<String> {
    circles.into_iter().map(|c| c.join(" <-> ")).collect()
}

#[test]
fn the_reader_sees_every_line_but_test_items() {
    let source = r#"
use crate::{
    b::{x, y},
    c,
};
// crate::d in a comment, "crate::d" in a string
fn f() { crate::e::g(); }
#[cfg(test)]
mod tests { use crate::h; }
#[cfg(test)]
mod fixtures;
fn late() { crate::i::j(); let c = '"'; super::k::l(); }
"#;
    let (code, test_modules) = without_tests(&lexed(source));
    assert_eq!(test_modules, vec!["fixtures".to_string()]);
    let heads: BTreeSet<String> = paths(&code)
        .into_iter()
        .map(|p| p[..2.min(p.len())].join("::"))
        .collect();
    assert_eq!(
        heads,
        BTreeSet::from(
            ["crate::b", "crate::c", "crate::e", "crate::i", "super::k"].map(String::from)
        )
    );
}

#[test]
fn a_module_brought_into_scope_is_followed_and_a_circle_of_files_found() {
    let library = Library::from_sources([
        ("a/mod.rs", "mod x; pub use x::X;"),
        ("a/x.rs", "use super::{super::b}; fn f() { b::y::g(); }"),
        ("b/mod.rs", "pub mod y;"),
        ("b/y.rs", "use crate::a::X; pub fn g() {}"),
        ("c.rs", "use crate::a; fn f() { a::x::X; }"),
    ]);
    let graph = library.file_graph();
    let module = |m: &str| m.split('/').map(String::from).collect::<Module>();
    assert_eq!(
        graph[&module("a/x")],
        BTreeSet::from([module("b"), module("b/y")])
    );
    assert_eq!(
        graph[&module("c")],
        BTreeSet::from([module("a"), module("a/x")])
    );
    // a/mod.rs → a/x.rs (its child) → b/y.rs → a/mod.rs
    assert_eq!(circles(&graph), vec![vec!["a", "a::x", "b::y"]]);
}

struct File {
    /// The code without comments, string contents and test items.
    code: String,
    lines: usize,
}

struct Library {
    files: BTreeMap<Module, File>,
}

impl Library {
    fn read(src: &Path) -> Self {
        let mut sources = Vec::new();
        for path in rust_files(src) {
            let relative = path
                .strip_prefix(src)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            sources.push((relative, fs::read_to_string(&path).unwrap()));
        }
        Self::from_sources(sources)
    }

    fn from_sources<P: AsRef<str>, S: AsRef<str>>(
        sources: impl IntoIterator<Item = (P, S)>,
    ) -> Self {
        let mut files = BTreeMap::new();
        let mut test_only = Vec::new();
        for (relative, source) in sources {
            let module = module_of(relative.as_ref());
            let (code, test_modules) = without_tests(&lexed(source.as_ref()));
            test_only.extend(test_modules.into_iter().map(|name| {
                let mut child = module.clone();
                child.push(name);
                child
            }));
            let lines = source.as_ref().lines().count();
            files.insert(module, File { code, lines });
        }
        files.retain(|module, _| !test_only.iter().any(|t| module.starts_with(t)));
        Library { files }
    }

    /// The longest prefix of `path` (from `base`) that is a file of the library.
    fn resolve(&self, base: &[String], path: &[String]) -> Option<Module> {
        (0..=path.len()).rev().find_map(|n| {
            let candidate: Module = base.iter().chain(&path[..n]).cloned().collect();
            self.files.contains_key(&candidate).then_some(candidate)
        })
    }

    /// File → the files it uses. A child's uses of its ancestors are left out: a module and
    /// its own children may use each other.
    fn file_graph(&self) -> Graph {
        let mut graph = Graph::new();
        for (module, file) in &self.files {
            let mut targets = BTreeSet::new();
            let mut scoped = Vec::new();
            for path in paths(&file.code) {
                let Some((base, rest)) = anchored(module, &path) else {
                    continue;
                };
                if let Some(target) = self.resolve(&base, &rest) {
                    // `use crate::a::b;` of a module: `b::c::...` later in the file is a path too.
                    if target.len() == base.len() + rest.len() && !rest.is_empty() {
                        scoped.push((rest.last().unwrap().clone(), target.clone()));
                    }
                    targets.insert(target);
                }
            }
            // `mod x;` makes `x::...` a path from here.
            for name in declared_modules(&file.code) {
                let mut child = module.clone();
                child.push(name.clone());
                scoped.push((name, child));
            }
            for (name, target) in scoped {
                for path in paths_from(&file.code, &name) {
                    targets.extend(self.resolve(&target, &path[1..]));
                }
            }
            targets.retain(|t| t != module && !module.starts_with(t));
            graph.insert(module.clone(), targets);
        }
        graph
    }
}

/// The names of the modules `code` declares as files (`mod x;`, `pub(crate) mod x;`).
fn declared_modules(code: &str) -> Vec<String> {
    code.split(';')
        .filter_map(|statement| {
            let words: Vec<&str> = statement.split_whitespace().collect();
            match words.as_slice() {
                [.., "mod", name] if !name.contains('{') => Some(name.to_string()),
                _ => None,
            }
        })
        .collect()
}

fn module_of(relative: &str) -> Module {
    let mut module: Module = relative
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
        module.pop();
    }
    module
}

/// `crate::`, `super::` and `self::` paths as (the module they start from, the rest).
fn anchored(module: &Module, path: &[String]) -> Option<(Module, Vec<String>)> {
    let mut base = module.clone();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("super" | "self") => {
            while let Some(head) = rest.first() {
                match head.as_str() {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    Some((base, rest.to_vec()))
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

/// The source without comments, with string and character literals emptied, so that only
/// code is searched for paths and braces.
fn lexed(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let (mut out, mut i) = (String::new(), 0);
    let at = |i: usize, s: &str| chars[i..].iter().take(s.len()).copied().eq(s.chars());
    while i < chars.len() {
        let c = chars[i];
        let after_word = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if at(i, "//") {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if at(i, "/*") {
            let mut depth = 0;
            while i < chars.len() {
                if at(i, "/*") {
                    depth += 1;
                    i += 2;
                } else if at(i, "*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if !after_word && (at(i, "r#") || at(i, "r\"") || at(i, "br")) {
            // A raw string: r"…", r#"…"#, br"…"; anything else starting with r is a word.
            let start = i + if c == 'b' { 2 } else { 1 };
            let hashes = chars[start..].iter().take_while(|&&h| h == '#').count();
            if chars.get(start + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let close: String = std::iter::once('"')
                .chain("#".repeat(hashes).chars())
                .collect();
            i = start + hashes + 1;
            while i < chars.len() && !at(i, &close) {
                i += 1;
            }
            i += close.len();
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && char_literal_len(&chars[i..]).is_some() {
            i += char_literal_len(&chars[i..]).unwrap();
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The length of a character literal at the start of `chars` ('a', '\n', '\u{1F600}'), or
/// None for a lifetime.
fn char_literal_len(chars: &[char]) -> Option<usize> {
    match chars.get(1)? {
        '\\' => chars[2..].iter().position(|&c| c == '\'').map(|p| p + 3),
        _ => (chars.get(2) == Some(&'\'')).then_some(3),
    }
}

/// The code without its `#[cfg(test)]` items, and the names of the modules those declare as
/// files (`#[cfg(test)] mod tests;`), which are test code too.
fn without_tests(code: &str) -> (String, Vec<String>) {
    const MARK: &str = "#[cfg(test)]";
    let (mut kept, mut test_modules, mut rest) = (String::new(), Vec::new(), code);
    while let Some(at) = rest.find(MARK) {
        kept.push_str(&rest[..at]);
        let item = &rest[at + MARK.len()..];
        let end = item_end(item);
        let words: Vec<&str> = item[..end]
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ';'))
            .filter(|w| !w.is_empty())
            .collect();
        if let Some(name) = words
            .iter()
            .position(|w| *w == "mod")
            .and_then(|p| words.get(p + 1))
            .and_then(|name| name.strip_suffix(';'))
        {
            test_modules.push(name.to_string());
        }
        rest = &item[end..];
    }
    kept.push_str(rest);
    (kept, test_modules)
}

/// Where the item at the start of `code` ends: after its closing brace, or after a `;`
/// outside braces.
fn item_end(code: &str) -> usize {
    let mut depth = 0;
    for (i, c) in code.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            ';' if depth == 0 => return i + 1,
            _ => {}
        }
    }
    code.len()
}

/// Every path starting with `crate`, `super` or `self`, groups expanded.
fn paths(code: &str) -> Vec<Vec<String>> {
    ["crate", "super", "self"]
        .iter()
        .flat_map(|head| paths_from(code, head))
        .collect()
}

/// Every path in `code` whose first segment is `head` and that has a second one.
fn paths_from(code: &str, head: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices(head) {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[at + head.len()..];
        if rest.trim_start().starts_with("::") {
            found.extend(path_at(&code[at..]).into_iter().filter(|p| p.len() > 1));
        }
    }
    found
}

/// The path (or paths, for a `{…}` group) at the start of `code`.
fn path_at(code: &str) -> Vec<Vec<String>> {
    let mut segments = Vec::new();
    let mut rest = code;
    loop {
        let trimmed = rest.trim_start();
        let word = identifier(trimmed);
        if word.is_empty() {
            return vec![segments];
        }
        segments.push(word.to_string());
        rest = trimmed[word.len()..].trim_start();
        let Some(after) = rest.strip_prefix("::") else {
            return vec![segments];
        };
        rest = after.trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            return group_items(group)
                .into_iter()
                .flat_map(|item| {
                    path_at(item)
                        .into_iter()
                        .map(|tail| segments.iter().cloned().chain(tail).collect::<Vec<_>>())
                })
                .collect();
        }
    }
}

/// The items of a `{…}` group, up to its closing brace.
fn group_items(group: &str) -> Vec<&str> {
    let (mut depth, mut items, mut start) = (0, Vec::new(), 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items
}

fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The file graph seen from above: each file becomes the group `group` puts it in (none:
/// left out), uses inside a group dropped.
fn collapse(files: &Graph, group: impl Fn(&Module) -> Option<String>) -> Graph {
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

fn names(modules: &BTreeSet<Module>) -> Vec<String> {
    modules.iter().map(|m| m.join("::")).collect()
}

/// The uses in `graph` of a higher layer than the user's, and of one of the `independent`
/// modules by another.
fn upward(graph: &Graph, layers: &[&[&str]], independent: &[&str]) -> Vec<String> {
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
fn circles(graph: &Graph) -> Vec<Vec<String>> {
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
