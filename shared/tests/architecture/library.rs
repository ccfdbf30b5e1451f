//! The library as files and the paths between them: each file's module, the files it uses.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::Path,
};

use crate::{
    source::{lexed, paths, paths_from, without_tests},
    Graph, Module,
};

pub struct File {
    /// The code without comments, string contents and test items.
    pub code: String,
    pub lines: usize,
}

pub struct Library {
    pub files: BTreeMap<Module, File>,
}

impl Library {
    pub fn read(src: &Path) -> Self {
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

    pub fn from_sources<P: AsRef<str>, S: AsRef<str>>(
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
    pub fn file_graph(&self) -> Graph {
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
