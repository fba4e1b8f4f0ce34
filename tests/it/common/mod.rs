//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod twins;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rosenblatt_backend::gpu::{GpuBackend, GpuOptions};
use rosenblatt_core::data::synth::{generate, SynthSpec, Synthetic};
use rosenblatt_core::data::{Dataset, Labels};

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

/// The GPU backend on the default adapter, opened once for the whole test binary (context
/// and pipelines built once, shared by every topic), or `None` with a visible "skipped" line;
/// with `ROSENBLATT_REQUIRE_GPU=1` a missing adapter fails the test instead.
pub fn gpu() -> Option<&'static GpuBackend> {
    static G: OnceLock<Option<GpuBackend>> = OnceLock::new();
    G.get_or_init(|| open_gpu(&GpuOptions::default())).as_ref()
}

/// A GPU backend of its own opened with `opts`, or `None` with a visible "skipped" line (a
/// failure under `ROSENBLATT_REQUIRE_GPU=1`). Dropped when the test is done with it: Mesa's
/// software adapter keeps memory for every dispatch while a device lives.
///
/// An OpenGL adapter is taken only when asked for (`WGPU_BACKEND=gl`, with one test at a
/// time): wgpu's GL backend gives up (panics) on a thread that waits more than 6 s for the
/// GL context, which a long llvmpipe dispatch of a test beside it holds that long. So on a
/// machine whose only adapter is OpenGL (Mesa's llvmpipe ships without lavapipe) the GPU
/// tests say "skipped" with what to do.
pub fn open_gpu(opts: &GpuOptions) -> Option<GpuBackend> {
    let why = match GpuBackend::new(opts) {
        Ok(g) if g.context().info.backend != wgpu::Backend::Gl || gl_asked() => return Some(g),
        Ok(g) => format!(
            "the only adapter is OpenGL ({}), which tests running side by side cannot share; \
             install Mesa's Vulkan (apt-get install mesa-vulkan-drivers), or run the GPU tests \
             on it one at a time: WGPU_BACKEND=gl cargo test --test it -- --test-threads=1",
            g.context().describe()
        ),
        Err(e) => format!("no GPU adapter ({e})"),
    };
    if std::env::var("ROSENBLATT_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        panic!("ROSENBLATT_REQUIRE_GPU=1 but no GPU backend: {why}")
    }
    use std::io::Write;
    // Written past the test harness's capture so that it shows.
    let _ = writeln!(std::io::stderr(), "skipped: {why}");
    None
}

/// Whether `WGPU_BACKEND` asks for OpenGL.
fn gl_asked() -> bool {
    std::env::var("WGPU_BACKEND").is_ok_and(|v| v.to_ascii_lowercase().contains("gl"))
}

/// Gives the heap's free memory back to the system (glibc's `malloc_trim`): after a GPU
/// backend of Mesa's software adapter is dropped, the memory it kept for its dispatches is
/// free but stays with the process's allocator arenas until trimmed.
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's arenas to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Integer features in [-2, 2]; `k` classes ("c0", ...) from noisy integer prototypes (10%
/// random labels): every sum the backends make is exact.
pub fn integer_classes(n: usize, d: usize, k: usize, seed: u64) -> Dataset {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let x: Vec<f32> = (0..n * d)
        .map(|_| rng.random_range(-2i32..=2) as f32)
        .collect();
    let names: Vec<String> = (0..n)
        .map(|i| {
            let s: f32 = x[i * d..(i + 1) * d].iter().sum();
            let c = if rng.random_bool(0.1) {
                rng.random_range(0..k)
            } else {
                (s.rem_euclid(k as f32)) as usize
            };
            format!("c{c}")
        })
        .collect();
    Dataset::new(x, n, d, Some(Labels::from_names(&names)), "integer")
}

/// A version-1 `.npy` header for `descr` and `shape` (e.g. `"(3, 2)"`), padded to 64 bytes;
/// the data follows it.
pub fn npy_header(descr: &str, shape: &str) -> Vec<u8> {
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend((h.len() as u16).to_le_bytes());
    v.extend(h.as_bytes());
    v
}

/// Runs the binary with `args` in `dir` under at most `kib` KiB of address space.
pub fn run_limited(dir: &Path, kib: u64, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib}; exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_rosenblatt"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Whether the calling test runs its body here: `name` (the test's path in this binary,
/// "topic::test") is run again alone in a child process of the test binary, which returns
/// true, while the parent waits for it, requires that it ran and passed, and returns false.
/// For tests that set process-wide state (the memory budget, `rosenblatt_core::limits`) or
/// measure the process's memory: the tests running beside them in this binary neither see
/// that state nor move those figures.
pub fn in_own_process(name: &str) -> bool {
    const CHILD: &str = "ROSENBLATT_IT_CHILD";
    if std::env::var_os(CHILD).is_some_and(|v| v == name) {
        return true;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--include-ignored", "--test-threads=1"])
        .env(CHILD, name)
        .output()
        .unwrap();
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        out.status.success(),
        "{name}, in a process of its own:\n{text}"
    );
    assert!(
        text.contains("1 passed"),
        "{name} did not run in its child process (a misspelt name?):\n{text}"
    );
    false
}

/// The process's anonymous resident memory in bytes (Linux), or `None`.
pub fn rss_anon() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("RssAnon:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Trains `p` on the CPU, unwrapping every error.
pub fn train(
    ds: &Dataset,
    p: rosenblatt_core::params::TrainParams,
) -> rosenblatt_train::algo::Trained {
    rosenblatt_train::algo::train(
        ds,
        &p.validate().unwrap(),
        &rosenblatt_backend::cpu::CpuBackend::new(),
        None,
        &mut (),
    )
    .unwrap()
}

/// Rows `i % 5 != 0` of `ds` for training (`test` false), the others held out.
pub fn split(ds: &Dataset, test: bool) -> Dataset {
    let keep: Vec<usize> = (0..ds.n).filter(|i| (i % 5 == 0) == test).collect();
    let labels = ds.labels.as_ref().unwrap();
    let names: Vec<&str> = keep
        .iter()
        .map(|&i| labels.classes[labels.index[i] as usize].as_str())
        .collect();
    Dataset::new(
        keep.iter().flat_map(|&i| ds.row(i).to_vec()).collect(),
        keep.len(),
        ds.d,
        Some(Labels::from_names(&names)),
        ds.source.clone(),
    )
}

/// scikit-learn's digits (tests/data/digits.csv) split by [`split`]: (training, held out).
pub fn digits() -> (Dataset, Dataset) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/digits.csv");
    let ds =
        rosenblatt_core::data::load(&path, &rosenblatt_core::data::LoadOptions::default()).unwrap();
    assert_eq!((ds.n, ds.d), (1797, 64));
    assert_eq!(ds.labels.as_ref().unwrap().classes.len(), 10);
    (split(&ds, false), split(&ds, true))
}

/// The names of the rosenblatt temporaries in `dir`, sorted.
pub fn temporaries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".rosenblatt-"))
        .collect();
    v.sort();
    v
}
