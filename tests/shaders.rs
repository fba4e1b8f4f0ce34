//! Every WGSL shader is parsed and validated by naga: a broken shader fails here, on any
//! machine, without a GPU.

use naga::valid::{Capabilities, ValidationFlags, Validator};

#[test]
fn all_shaders_parse_and_validate() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("wgsl") {
            continue;
        }
        let src = std::fs::read_to_string(&path).unwrap();
        let module = naga::front::wgsl::parse_str(&src)
            .unwrap_or_else(|e| panic!("{}: {}", path.display(), e.emit_to_string(&src)));
        Validator::new(ValidationFlags::all(), Capabilities::empty())
            .validate(&module)
            .unwrap_or_else(|e| panic!("{}: {}", path.display(), e.emit_to_string(&src)));
        checked += 1;
    }
    assert!(checked >= 1, "no shaders found in {}", dir.display());
}

#[test]
fn batch_shader_has_the_entry_points_and_overrides_the_host_uses() {
    let src = include_str!("../shaders/batch.wgsl");
    let module = naga::front::wgsl::parse_str(src).unwrap();
    let entries: Vec<&str> = module
        .entry_points
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    for name in [
        "margins",
        "accumulate",
        "fused",
        "apply",
        "finalize",
        "scores",
    ] {
        assert!(
            entries.contains(&name),
            "missing entry point {name}: {entries:?}"
        );
    }
    let overrides: Vec<&str> = module
        .overrides
        .iter()
        .filter_map(|(_, o)| o.name.as_deref())
        .collect();
    for name in ["WG", "TPR", "TC"] {
        assert!(
            overrides.contains(&name),
            "missing override {name}: {overrides:?}"
        );
    }
}
