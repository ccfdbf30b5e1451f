//! The library's shape, checked from its source (docs/architecture.md): every path a file
//! uses (`crate::`, `super::`, `self::`, and the modules those bring into scope) must point
//! to its own layer or one below, at the top level and inside `pipeline/`; no two files
//! reach each other, however indirectly (a module and its own children aside); no file is
//! over [`MAX_LINES`]. Every line of every file is read except the test items themselves
//! (`#[cfg(test)]` items and the files they declare).

mod graph;
mod library;
mod source;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use graph::{circles, collapse, names, upward};
use library::Library;
use source::{lexed, paths, without_tests};

/// Top to bottom, as in docs/architecture.md. A module may use its own layer and those below.
const LAYERS: &[&[&str]] = &[
    &["http", "operations"],
    &["quality"],
    &["aws"],
    &["pipeline"],
    &["config"],
    &["providers", "db", "connectors"],
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
        "zendesk",
    ],
    &["ledger"],
    &["invocation", "outbox"],
    &[
        "answering",
        "limits",
        "pause",
        "prompt_registry",
        "taxonomy",
    ],
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
