//! The library's modules form no circle: for every top-level module of `src/` (a file or a
//! folder), the modules it names through `crate::` are collected, and the graph must be
//! acyclic (ARCHITECTURE.md draws it). A new `use crate::x` that closes a circle fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Top-level module -> the top-level modules it uses.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    // `pub use error::{Error, Result};` in lib.rs: Error -> error, Result -> error.
    let mut reexports = BTreeMap::new();
    for line in std::fs::read_to_string(src.join("lib.rs")).unwrap().lines() {
        if let Some(rest) = line.trim().strip_prefix("pub use ") {
            if let Some((module, items)) = rest.split_once("::") {
                let items = items.trim_matches(|c| c == '{' || c == '}' || c == ';');
                for item in items.split(',') {
                    reexports.insert(item.trim().to_string(), module.to_string());
                }
            }
        }
    }
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        // The binary's modules (main.rs, cli/) use the library by name, not by crate::.
        if module == "main" || module == "cli" || module == "lib" {
            continue;
        }
        // Code only: comments and doc comments may name modules they do not use.
        let text: String = std::fs::read_to_string(&f)
            .unwrap()
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let uses = g.entry(module.clone()).or_default();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let names: Vec<String> = match rest.strip_prefix('{') {
                // `use crate::{a::X, b::{Y, Z}}`: the first segment of each top-level item.
                Some(group) => {
                    let mut items = vec![String::new()];
                    let mut depth = 0;
                    for c in group.chars() {
                        match c {
                            '}' if depth == 0 => break,
                            '{' => depth += 1,
                            '}' => depth -= 1,
                            ',' if depth == 0 => items.push(String::new()),
                            c => items.last_mut().unwrap().push(c),
                        }
                    }
                    items
                        .iter()
                        .map(|i| i.trim().chars().take_while(|&c| ident(c)).collect())
                        .collect()
                }
                None => vec![rest.chars().take_while(|&c| ident(c)).collect()],
            };
            for name in names {
                // Items the crate root re-exports count as uses of their module.
                let name = reexports.get(&name).cloned().unwrap_or(name);
                if !name.is_empty() && name != module {
                    uses.insert(name);
                }
            }
        }
    }
    // Names that are not modules (macros exported at the root, re-exports) are dropped.
    let modules: BTreeSet<String> = g.keys().cloned().collect();
    for uses in g.values_mut() {
        uses.retain(|u| modules.contains(u));
    }
    g
}

/// A circle through `g`, if there is one.
fn circle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut c = path[i..].to_vec();
            c.push(m.to_string());
            return Some(c);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for u in &g[m] {
            if let Some(c) = visit(u, g, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for m in g.keys() {
        if let Some(c) = visit(m, g, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

#[test]
fn the_library_modules_form_no_circle() {
    let g = graph();
    assert!(g.len() >= 10, "{g:?}");
    assert!(g["algo"].contains("backend"), "{g:?}");
    // Seen through a root re-export (crate::Error) and through a grouped import.
    assert!(g["backend"].contains("error"), "{g:?}");
    assert!(g["model"].contains("report"), "{g:?}");
    if let Some(c) = circle(&g) {
        panic!("module circle: {}", c.join(" -> "));
    }
}

#[test]
fn a_circle_is_found() {
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(circle(&g).unwrap(), vec!["a", "b", "a"]);
}

/// The Python crate builds on the crate root's API alone: it takes the library without its
/// default features and without `internals`, where every module is private, so a path into
/// a module fails to compile there.
#[test]
fn the_python_crate_sees_only_the_root_api() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("python/Cargo.toml")).unwrap();
    let dep = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("rosenblatt ="))
        .expect("python/Cargo.toml depends on rosenblatt");
    assert!(dep.contains("default-features = false"), "{dep}");
    assert!(
        !dep.contains("internals") && !dep.contains("\"cli\""),
        "{dep}"
    );
    // And the library's own manifest keeps the modules behind `internals`.
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let public = lib.lines().filter(|l| l.starts_with("pub mod ")).count();
    let hidden = lib.lines().filter(|l| l.trim() == "#[doc(hidden)]").count();
    assert!(
        public > 10 && public == hidden,
        "{public} pub mods, {hidden} hidden"
    );
    assert!(lib.contains("#![warn(missing_docs)]"));
}

/// The library's layers, lowest first (ARCHITECTURE.md draws them): a module may use its own
/// layer's modules and lower ones, never a higher one. So the data loaders and the parameters
/// cannot reach a backend, and the backends cannot reach the algorithms or the model.
const LAYERS: [&[&str]; 6] = [
    // Foundations: errors, limits, files written whole, fault hooks, the allocator, the
    // matrix and storage types with their SIMD kernels, the collectives' seam, metrics.
    &[
        "error", "limits", "output", "fault", "alloc", "matrix", "reduce", "metrics",
    ],
    &["params"],
    &["data"],
    &["backend"],
    // What trains and what it makes: algorithms, the trainer, the model, the report, MPI.
    &["algo", "trainer", "model", "report", "distributed"],
    // The command line's application code.
    &["bench", "experiment", "plot"],
];

fn layer(m: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&m))
}

/// Edges from a lower layer to a higher one (and modules no layer names).
fn wrong_way(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut out = Vec::new();
    for (m, uses) in g {
        let Some(lm) = layer(m) else {
            out.push(format!("{m} is in no layer"));
            continue;
        };
        for u in uses {
            if layer(u).is_some_and(|lu| lu > lm) {
                out.push(format!(
                    "{m} (layer {lm}) uses {u} (layer {})",
                    layer(u).unwrap()
                ));
            }
        }
    }
    out
}

#[test]
fn every_module_uses_only_its_layer_and_those_below() {
    let g = graph();
    let bad = wrong_way(&g);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    // The matrix and storage types are below the backends: the loaders use them, not a
    // backend.
    assert!(
        g["data"].contains("matrix") && !g["data"].contains("backend"),
        "{g:?}"
    );
    // ... and a wrong-way use is found.
    let mut g2 = g.clone();
    g2.get_mut("data").unwrap().insert("backend".to_string());
    assert_eq!(
        wrong_way(&g2),
        vec!["data (layer 2) uses backend (layer 3)"]
    );
}
