//! The documentation's shell examples run: every `rosenblatt` command in a ```sh block of the
//! README and the guide is run (through `sh`, with the built binary first on PATH) in a fresh
//! directory per file, in order, and must exit 0; a ```text block right after a block is
//! output that the block's last command must print. Commands of other tools in those blocks
//! (`cargo`, `pip`, `apt-get`) are what CI itself runs. The guide's Rust example is a doctest
//! (`GuideExamples` in src/lib.rs); the README's Python example runs in python/tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A fenced block: its info string and its lines.
struct Block {
    info: String,
    lines: Vec<String>,
}

fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for line in markdown.lines() {
        if let Some(info) = line.strip_prefix("```") {
            match open.take() {
                Some(b) => out.push(b),
                None => {
                    open = Some(Block {
                        info: info.trim().to_string(),
                        lines: Vec::new(),
                    })
                }
            }
        } else if let Some(b) = open.as_mut() {
            b.lines.push(line.to_string());
        }
    }
    assert!(open.is_none(), "an unclosed code block");
    out
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the `rosenblatt` lines of `file`'s sh blocks; returns how many ran.
fn run_examples(file: &str) -> usize {
    let text = std::fs::read_to_string(repo().join(file)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The examples read the repository's test data and write pictures under docs/.
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    std::fs::create_dir_all(dir.path().join("tests/data")).unwrap();
    for f in std::fs::read_dir(repo().join("tests/data")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(
            &f,
            dir.path().join("tests/data").join(f.file_name().unwrap()),
        )
        .unwrap();
    }
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_rosenblatt"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let all = blocks(&text);
    let mut ran = 0;
    for (i, b) in all.iter().enumerate() {
        if b.info != "sh" {
            continue;
        }
        let mut last = String::new();
        for line in &b.lines {
            if !line.trim_start().starts_with("rosenblatt ") {
                continue;
            }
            last = run_line(dir.path(), &path, line, file);
            ran += 1;
        }
        if let Some(next) = all.get(i + 1).filter(|n| n.info == "text") {
            for want in &next.lines {
                assert!(
                    last.lines().any(|l| l.trim_end() == want.trim_end()),
                    "{file}: the output shown after the block is not what it prints: \
                     missing {want:?} in\n{last}"
                );
            }
        }
    }
    ran
}

fn run_line(dir: &Path, path: &str, line: &str, file: &str) -> String {
    let o = Command::new("sh")
        .args(["-c", line])
        .current_dir(dir)
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{file}: `{line}` failed ({}):\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_readmes_commands_run() {
    assert!(run_examples("README.md") >= 6);
}

#[test]
fn the_guides_commands_run_and_print_what_it_shows() {
    assert!(run_examples("docs/guide.md") >= 14);
}
