//! Every WGSL shader is parsed and validated by naga, and every pipeline the host can build
//! is translated to the shading language of every backend wgpu drives: SPIR-V (Vulkan,
//! checked by `spirv-val`), MSL (Metal), HLSL (DX12) and GLSL ES 3.10 (OpenGL). A broken shader, or a construct one
//! backend lacks, fails here, on any machine, without a GPU.
//!
//! `spirv-val` comes from Debian's `spirv-tools`; without it the SPIR-V check prints
//! "skipped", unless ROSENBLATT_REQUIRE_SPIRV_VAL=1 (CI sets it), which makes it fail.

use std::io::Write;

use naga::valid::{Capabilities, ShaderStages, SubgroupOperationSet, ValidationFlags, Validator};
use rosenblatt_backend::gpu::batch::{batch_source, Entry, LaneSums, Shape};
use rosenblatt_backend::gpu::plan::{reachable_shapes, GL_KT_CAP};

fn validator(subgroups: bool) -> Validator {
    let caps = if subgroups {
        Capabilities::SUBGROUP
    } else {
        Capabilities::empty()
    };
    let mut v = Validator::new(ValidationFlags::all(), caps);
    v.subgroup_stages(ShaderStages::COMPUTE);
    v.subgroup_operations(SubgroupOperationSet::all());
    v
}

/// A module from WGSL, validated (with subgroup operations allowed or not).
fn module(src: &str, subgroups: bool, what: &str) -> (naga::Module, naga::valid::ModuleInfo) {
    let m = naga::front::wgsl::parse_str(src)
        .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(src)));
    let info = validator(subgroups)
        .validate(&m)
        .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(src)));
    (m, info)
}

#[test]
fn all_shaders_parse_and_validate() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // The batch and stepped modules' parts are checked whole below.
        let part = ["batch", "steps", "subgroups"]
            .iter()
            .any(|p| name.starts_with(p));
        if !name.ends_with(".wgsl") || part {
            continue;
        }
        let src = std::fs::read_to_string(&path).unwrap();
        module(&src, false, &path.display().to_string());
        checked += 1;
    }
    // Each module with its parameter blocks in uniform buffers (as written: hardware
    // adapters) and in storage buffers (software adapters), which the translations below
    // take as written.
    use rosenblatt_backend::gpu::{context::params_source, ParamsSpace};
    for space in [ParamsSpace::Uniform, ParamsSpace::Storage] {
        for lanes in LaneSums::ALL {
            let subgroups = lanes.needs_subgroups();
            module(
                &params_source(&batch_source(lanes), space),
                subgroups,
                "batch module",
            );
            let steps = rosenblatt_backend::gpu::steps::steps_source(lanes);
            module(&params_source(&steps, space), subgroups, "stepped module");
            checked += 2;
        }
        let csr = rosenblatt_backend::gpu::steps::steps_csr_source();
        module(
            &params_source(&csr, space),
            false,
            "stepped module for sparse rows",
        );
        let kernel = std::fs::read_to_string(dir.join("kernel.wgsl")).unwrap();
        module(&params_source(&kernel, space), false, "kernel module");
        checked += 2;
    }
    assert!(checked >= 3, "no shaders found in {}", dir.display());
}

#[test]
fn batch_shader_has_the_entry_points_and_overrides_the_host_uses() {
    for lanes in LaneSums::ALL {
        let subgroups = lanes.needs_subgroups();
        let (m, _) = module(&batch_source(lanes), subgroups, "batch module");
        let entries: Vec<&str> = m.entry_points.iter().map(|e| e.name.as_str()).collect();
        let mut want: Vec<&str> = Entry::ALL.iter().map(|e| e.name()).collect();
        let mut got = entries.clone();
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want, "entry points (subgroups: {subgroups})");
        let overrides: Vec<&str> = m
            .overrides
            .iter()
            .filter_map(|(_, o)| o.name.as_deref())
            .collect();
        let shape = reachable_shapes()[0];
        for (name, _) in shape.constants() {
            assert!(
                overrides.contains(&name),
                "missing override {name}: {overrides:?}"
            );
        }
        assert_eq!(overrides.len(), shape.constants().len(), "{overrides:?}");
    }
}

/// `spirv-val`, or `None` (skipped visibly unless required).
fn spirv_val() -> Option<std::path::PathBuf> {
    let found = std::process::Command::new("spirv-val")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return Some("spirv-val".into());
    }
    if std::env::var("ROSENBLATT_REQUIRE_SPIRV_VAL").is_ok_and(|v| v == "1") {
        panic!("ROSENBLATT_REQUIRE_SPIRV_VAL=1 but spirv-val is not on PATH (apt-get install spirv-tools)");
    }
    let _ = writeln!(
        std::io::stderr(),
        "skipped: SPIR-V validation (no spirv-val; apt-get install spirv-tools)"
    );
    None
}

/// The module specialised to override values `constants` (`what` names them in panics),
/// with its info.
fn specialise(
    m: &naga::Module,
    info: &naga::valid::ModuleInfo,
    constants: &[(&str, f64)],
    what: &str,
) -> (naga::Module, naga::valid::ModuleInfo) {
    let constants = constants.iter().map(|&(k, v)| (k.to_string(), v)).collect();
    let (m, info) = naga::back::pipeline_constants::process_overrides(m, info, None, &constants)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    (m.into_owned(), info.into_owned())
}

/// Bytes of workgroup memory of a specialised module: each variable rounded up to 16 bytes.
fn workgroup_bytes(m: &naga::Module) -> u32 {
    let mut layouter = naga::proc::Layouter::default();
    layouter.update(m.to_ctx()).unwrap();
    m.global_variables
        .iter()
        .filter(|(_, g)| g.space == naga::AddressSpace::WorkGroup)
        .map(|(_, g)| layouter[g.ty].size.next_multiple_of(16))
        .sum()
}

/// SPIR-V, MSL and HLSL of the batch module specialised to `shape` (panics naming the shape
/// on any failure); returns the SPIR-V words.
fn translate(m: &naga::Module, info: &naga::valid::ModuleInfo, shape: &Shape) -> Vec<u32> {
    let what = format!("{shape:?}");
    let (m, info) = specialise(m, info, &shape.constants(), &what);
    assert_eq!(
        workgroup_bytes(&m),
        shape.workgroup_bytes(),
        "the host's workgroup memory for {shape:?}"
    );
    let words = translate_specialised(&m, &info, shape.subgroups, &what);
    if !shape.subgroups && shape.kt <= GL_KT_CAP {
        glsl(&m, &info, shape);
    }
    words
}

/// SPIR-V, MSL and HLSL of a specialised module (panics naming `what` on any failure);
/// returns the SPIR-V words.
fn translate_specialised(
    m: &naga::Module,
    info: &naga::valid::ModuleInfo,
    subgroups: bool,
    what: &str,
) -> Vec<u32> {
    use naga::back::{hlsl, msl, spv};
    // SPIR-V: 1.0 for Vulkan 1.0 (the tree), 1.3 for subgroups (Vulkan 1.1), with the bounds
    // checks wgpu's Vulkan backend adds without robust buffer access.
    let opts = spv::Options {
        lang_version: if subgroups { (1, 3) } else { (1, 0) },
        bounds_check_policies: naga::proc::BoundsCheckPolicies {
            index: naga::proc::BoundsCheckPolicy::Restrict,
            buffer: naga::proc::BoundsCheckPolicy::Restrict,
            ..Default::default()
        },
        zero_initialize_workgroup_memory: spv::ZeroInitializeWorkgroupMemoryMode::Polyfill,
        ..Default::default()
    };
    let words =
        spv::write_vec(m, info, &opts, None).unwrap_or_else(|e| panic!("SPIR-V for {what}: {e}"));
    // MSL 2.1 (subgroup operations need it) and HLSL shader model 6.0 (wave operations).
    let msl_opts = msl::Options {
        lang_version: (2, 1),
        fake_missing_bindings: true,
        zero_initialize_workgroup_memory: true,
        ..Default::default()
    };
    msl::write_string(m, info, &msl_opts, &msl::PipelineOptions::default())
        .unwrap_or_else(|e| panic!("MSL for {what}: {e}"));
    let hlsl_opts = hlsl::Options {
        shader_model: hlsl::ShaderModel::V6_0,
        fake_missing_bindings: true,
        ..Default::default()
    };
    let mut out = String::new();
    hlsl::Writer::new(&mut out, &hlsl_opts, &hlsl::PipelineOptions::default())
        .write(m, info, None)
        .unwrap_or_else(|e| panic!("HLSL for {what}: {e}"));
    words
}

/// GLSL ES 3.10 (what wgpu's GL backend asks of OpenGL ES 3.1 / GL 4.3) of every entry point
/// of a specialised module that OpenGL runs (no subgroups, which GL lacks; one head per
/// thread, `GL_KT_CAP`), one entry point per shader as wgpu writes them: the GL pass of the
/// GPU tests runs only some shapes (each compiles for seconds on llvmpipe), this translates
/// them all.
fn glsl(m: &naga::Module, info: &naga::valid::ModuleInfo, shape: &Shape) {
    use naga::back::glsl;
    let opts = glsl::Options {
        version: glsl::Version::new_gles(310),
        writer_flags: glsl::WriterFlags::empty(),
        ..Default::default()
    };
    for ep in &m.entry_points {
        let pipeline = glsl::PipelineOptions {
            shader_stage: naga::ShaderStage::Compute,
            entry_point: ep.name.clone(),
            multiview: None,
        };
        let mut out = String::new();
        glsl::Writer::new(
            &mut out,
            m,
            info,
            &opts,
            &pipeline,
            naga::proc::BoundsCheckPolicies::default(),
        )
        .and_then(|mut w| w.write())
        .unwrap_or_else(|e| panic!("GLSL for {} of {shape:?}: {e}", ep.name));
    }
}

/// What a shape exercises for the sample: each override's value, the lane sums, whether
/// OpenGL runs it (its GLSL is written), and the epoch's form in each storage.
fn traits(s: &Shape) -> Vec<String> {
    let mut t: Vec<String> = (s.constants().iter())
        .map(|(name, v)| format!("{name}={v}"))
        .collect();
    t.push(format!("subgroups={}", s.subgroups));
    t.push(format!("glsl={}", !s.subgroups && s.kt <= GL_KT_CAP));
    let form = rosenblatt_backend::gpu::GpuPath::of_shape(s);
    t.push(format!("{form:?} in storage {}", s.storage));
    t
}

/// A seeded sample of [`reachable_shapes`]: in a seeded shuffle, each shape that exercises
/// something no shape before it did ([`traits`]): every override's every value, both lane
/// sums, GLSL, and every form of the epoch in every storage, at least once. The entry points
/// are translated with every shape (the writers take the module whole).
fn sampled_shapes(seed: u64) -> Vec<Shape> {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let mut shapes = reachable_shapes();
    shapes.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
    let mut seen = std::collections::BTreeSet::new();
    shapes
        .into_iter()
        .filter(|s| {
            let new = traits(s).into_iter().filter(|t| !seen.contains(t)).count() > 0;
            seen.extend(traits(s));
            new
        })
        .collect()
}

/// Tier 1's share of the sweep below: a seeded sample ([`sampled_shapes`]) translated and
/// validated alike. A change that breaks one value of one override breaks a shape here.
#[test]
fn a_sample_of_specialisations_covering_every_override_value_translates() {
    let all = reachable_shapes();
    let sample = sampled_shapes(60);
    let covered = |v: &[Shape]| {
        v.iter()
            .flat_map(traits)
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(covered(&sample), covered(&all), "the sample's reach");
    assert!(
        sample.len() * 20 < all.len(),
        "{} of {}",
        sample.len(),
        all.len()
    );
    eprintln!("{} of the {} shapes", sample.len(), all.len());
    translate_and_validate(&sample);
}

/// Every shape the planner can choose: the exhaustive sweep (tier 2).
#[test]
#[ignore = "tier 2: all 11,264 shapes through spirv-val, minutes"]
fn tier2_every_specialisation_translates_to_spirv_msl_hlsl_and_glsl() {
    let shapes = reachable_shapes();
    assert!(shapes.len() > 100, "{}", shapes.len());
    translate_and_validate(&shapes);
}

/// SPIR-V (checked by `spirv-val`), MSL, HLSL and, where OpenGL runs it, GLSL of each shape.
fn translate_and_validate(shapes: &[Shape]) {
    use rayon::prelude::*;
    let val = spirv_val();
    let dir = tempfile::tempdir().unwrap();
    let modules =
        LaneSums::ALL.map(|l| module(&batch_source(l), l.needs_subgroups(), "batch module"));
    // A thread pool of its own: on rayon's global pool, the tests running beside this one
    // that train on the CPU (through rayon) would wait for all its shapes.
    let pool = rayon::ThreadPoolBuilder::new().build().unwrap();
    pool.install(|| {
        shapes.par_iter().enumerate().for_each(|(i, shape)| {
            let (m, info) = &modules[usize::from(shape.subgroups)];
            let words = translate(m, info, shape);
            if let Some(val) = &val {
                let file = dir.path().join(format!("{i}.spv"));
                spirv_validate(val, &file, &words, shape.subgroups, &format!("{shape:?}"));
            }
        })
    });
}

/// `spirv-val` on `words` (written to `file`, then removed), for Vulkan 1.1 with subgroups
/// else 1.0; panics naming `what` with its output.
fn spirv_validate(
    val: &std::path::Path,
    file: &std::path::Path,
    words: &[u32],
    subgroups: bool,
    what: &str,
) {
    std::fs::write(file, bytemuck::cast_slice::<u32, u8>(words)).unwrap();
    let env = if subgroups { "vulkan1.1" } else { "vulkan1.0" };
    let o = std::process::Command::new(val)
        .args(["--target-env", env])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "spirv-val {env} for {what}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::remove_file(file);
}

/// The stepped module by lanes, specialised to every kind of shape the host plans
/// (`LanesShape::plan` over features, heads and step rows, on a device with 8- and 32-lane
/// subgroups), translates to SPIR-V (valid for Vulkan 1.1), MSL and HLSL, with the workgroup
/// memory the host counts; the modules by threads (dense and sparse rows) translate too.
#[test]
fn stepped_specialisations_translate() {
    use rosenblatt_backend::gpu::steps::{steps_csr_source, steps_source, LanesShape};
    let val = spirv_val();
    let dir = tempfile::tempdir().unwrap();
    let (m, info) = module(
        &steps_source(LaneSums::Subgroups),
        true,
        "stepped module by lanes",
    );
    let limits = wgpu::Limits {
        max_compute_workgroup_storage_size: 32768,
        ..wgpu::Limits::default()
    };
    let mut shapes = Vec::new();
    for d in [1, 63, 64, 300, 784, 1023] {
        for heads in [1, 3, 10, 16] {
            for rows in [1, 14, 32] {
                for sgs in [8, 32] {
                    if let Some(l) = LanesShape::plan(d, heads, rows, sgs, &limits) {
                        if !shapes.contains(&l) {
                            shapes.push(l);
                        }
                    }
                }
            }
        }
    }
    assert!(shapes.len() > 30, "{shapes:?}");
    assert!(
        LanesShape::plan(1024, 3, 4, 32, &limits).is_none(),
        "1,025 columns"
    );
    assert!(
        LanesShape::plan(10, 17, 4, 32, &limits).is_none(),
        "17 heads"
    );
    for (i, l) in shapes.iter().enumerate() {
        let what = format!("{l:?}");
        let (m, info) = specialise(&m, &info, &l.constants(), &what);
        assert_eq!(
            u64::from(workgroup_bytes(&m)),
            l.workgroup_bytes(),
            "the host's workgroup memory for {what}"
        );
        let words = translate_specialised(&m, &info, true, &what);
        if let Some(val) = &val {
            spirv_validate(
                val,
                &dir.path().join(format!("s{i}.spv")),
                &words,
                true,
                &what,
            );
        }
    }
    let sources = [
        (steps_source(LaneSums::Tree), "stepped module by threads"),
        (steps_csr_source(), "stepped module for sparse rows"),
    ];
    for (i, (src, what)) in sources.iter().enumerate() {
        let (m, info) = module(src, false, what);
        let (m, info) = specialise(&m, &info, &[("WG", 256.0)], what);
        let words = translate_specialised(&m, &info, false, what);
        if let Some(val) = &val {
            let file = dir.path().join(format!("t{i}.spv"));
            spirv_validate(val, &file, &words, false, what);
        }
    }
}
