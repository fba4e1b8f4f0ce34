//! The library's layers (ARCHITECTURE.md draws them). Between crates the compiler keeps
//! them: rosenblatt-core <- rosenblatt-backend <- rosenblatt-train <- rosenblatt-app <- the
//! `rosenblatt` package, each depending only on those below, so a wrong-way import does not
//! compile (and cargo refuses the circle a wrong-way dependency would make); the manifests
//! are checked here to be that chain. Inside a crate, the top-level modules (a file or a
//! folder of its `src/`) must form no circle, and rosenblatt-core's keep their order: the
//! modules each names through `crate::` are collected and checked.

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

/// The workspace's library crates, lowest first: (package, folder).
const CRATES: [(&str, &str); 4] = [
    ("rosenblatt-core", "crates/core"),
    ("rosenblatt-backend", "crates/backend"),
    ("rosenblatt-train", "crates/train"),
    ("rosenblatt-app", "crates/app"),
];

/// Top-level module -> the top-level modules of the same crate it uses, for the crate in
/// `dir` (relative to the workspace root).
fn graph(dir: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir).join("src");
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
        if module == "lib" {
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
    // Names that are not modules of this crate (macros exported at the root, the layers
    // below named at the root) are dropped.
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
fn the_modules_of_each_crate_form_no_circle() {
    for (name, dir) in CRATES {
        let g = graph(dir);
        if let Some(c) = circle(&g) {
            panic!("module circle in {name}: {}", c.join(" -> "));
        }
    }
    let train = graph("crates/train");
    assert!(train.len() >= 4, "{train:?}");
    // Seen through a grouped import; the layers below (`crate::backend`, named at the root)
    // are not this crate's modules.
    assert!(train["model"].contains("report"), "{train:?}");
    assert!(!train["algo"].contains("backend"), "{train:?}");
}

/// `[dependencies]` of a manifest (the target-specific tables too, not the dev ones): the
/// workspace's crates named there.
fn workspace_deps(manifest: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut normal = false;
    for line in manifest.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            normal = t == "[dependencies]"
                || (t.starts_with("[target.") && t.ends_with(".dependencies]"));
            continue;
        }
        if normal {
            let name = t.split(['=', '.', ' ']).next().unwrap_or("");
            if name.starts_with("rosenblatt") {
                out.insert(name.to_string());
            }
        }
    }
    out
}

#[test]
fn each_crate_depends_only_on_the_crates_below_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (i, (name, dir)) in CRATES.iter().enumerate() {
        let manifest = std::fs::read_to_string(root.join(dir).join("Cargo.toml")).unwrap();
        assert!(manifest.contains(&format!("name = \"{name}\"")), "{dir}");
        let below: BTreeSet<String> = CRATES[..i].iter().map(|c| c.0.to_string()).collect();
        let deps = workspace_deps(&manifest);
        assert!(deps.is_subset(&below), "{name} depends on {deps:?}");
    }
    // The package on top re-exports the API and runs the command line; without its default
    // features it carries no application crate.
    let top = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert_eq!(
        workspace_deps(&top),
        CRATES
            .iter()
            .map(|c| c.0.to_string())
            .collect::<BTreeSet<_>>()
    );
    assert!(top.contains("rosenblatt-app = { workspace = true, optional = true }"));
    // And the manifest reader sees a wrong-way dependency.
    let wrong =
        "[dependencies]\nrosenblatt-train.workspace = true\n[dev-dependencies]\nrosenblatt = 1\n";
    assert_eq!(
        workspace_deps(wrong),
        BTreeSet::from(["rosenblatt-train".to_string()])
    );
}

#[test]
fn a_circle_is_found() {
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(circle(&g).unwrap(), vec!["a", "b", "a"]);
}

/// The Python crate builds on the `rosenblatt` crate's API alone: it depends on that crate
/// (without its default features) and on none of the layers, and that crate declares no
/// module of its own, only the re-exported names.
#[test]
fn the_python_crate_sees_only_the_root_api() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("python/Cargo.toml")).unwrap();
    let dep = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("rosenblatt ="))
        .expect("python/Cargo.toml depends on rosenblatt");
    assert!(dep.contains("default-features = false"), "{dep}");
    assert!(!dep.contains("\"cli\""), "{dep}");
    assert!(workspace_deps(&manifest) == BTreeSet::from(["rosenblatt".to_string()]));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    assert!(!lib
        .lines()
        .any(|l| l.starts_with("pub mod ") || l.starts_with("mod ")));
    assert!(lib.contains("#![warn(missing_docs)]"));
    for (_, dir) in CRATES {
        let lib = std::fs::read_to_string(root.join(dir).join("src/lib.rs")).unwrap();
        assert!(lib.contains("#![warn(missing_docs)]"), "{dir}");
    }
}

/// rosenblatt-core's layers, lowest first (ARCHITECTURE.md draws them): a module may use its
/// own layer's modules and lower ones, never a higher one. (Above these, the crates.)
const LAYERS: [&[&str]; 3] = [
    // Foundations: errors, limits, files written whole, fault hooks, the allocator, the
    // matrix and storage types with their SIMD kernels, the collectives' seam, metrics.
    &[
        "error", "limits", "output", "fault", "alloc", "matrix", "reduce", "metrics",
    ],
    &["params"],
    &["data"],
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
    let g = graph("crates/core");
    let bad = wrong_way(&g);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    // The loaders use the matrix and storage types and the parameters.
    assert!(
        g["data"].contains("matrix") && g["data"].contains("params"),
        "{g:?}"
    );
    // ... and a wrong-way use is found.
    let mut g2 = g.clone();
    g2.get_mut("params").unwrap().insert("data".to_string());
    assert_eq!(wrong_way(&g2), vec!["params (layer 1) uses data (layer 2)"]);
}
