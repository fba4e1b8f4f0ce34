//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rosenblatt::data::synth::{generate, SynthSpec, Synthetic};

/// Generated separable data.
pub fn separable(n: usize, d: usize, margin: f32, seed: u64) -> Synthetic {
    generate(&SynthSpec {
        n,
        d,
        margin,
        noise: 0.0,
        seed,
    })
    .unwrap()
}

/// Runs the built binary with `args`, in `dir`.
pub fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rosenblatt"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the binary runs")
}

/// stdout as a string.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr as a string.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}
