//! The `#[repr(C)]` structs and constants shared with the WGSL shaders. They are not kept in
//! sync by comment: the tests below parse the shaders with naga and check that every mirrored
//! struct has the same size and member offsets (naga's layouter) and that every rule, flag
//! and kernel code and the head limit in WGSL equal the Rust values.

use bytemuck::{Pod, Zeroable};

use crate::{BatchRule, Keep, Update};

/// Mirrors `Params` in batch.wgsl.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct Params {
    pub d: u32,
    pub d_aug: u32,
    pub bias: f32,
    pub eta: f32,
    pub tol: f32,
    pub total_chunks: u32,
    pub total_wgs: u32,
    pub heads: u32,
    pub rule: u32,
    pub tau: f32,
    pub flags: u32,
    pub patience: u32,
    pub keep_fraction: f32,
    pub floor: f32,
    pub units: u32,
    pub ring: u32,
    /// One-vs-rest class factors, [`MAX_HEADS`](crate::MAX_HEADS) of them (1 where
    /// the run has none): [`TrainView::own`](crate::TrainView::own).
    pub own: [f32; crate::MAX_HEADS],
}

/// `Params::flags` bit: keep the pocket.
pub const FLAG_POCKET: u32 = 1;
/// `Params::flags` bit: keep the average sum.
pub const FLAG_AVERAGE: u32 = 2;
/// `Params::flags` bit: Winnow's multiplicative update on log-weights.
pub const FLAG_MULTIPLICATIVE: u32 = 4;
/// `Params::flags` bit: per-row weights scale the updates.
pub const FLAG_WEIGHTS: u32 = 8;
/// `Params::flags` bit: held-out segments exist and their mistakes are monitored.
pub const FLAG_HELD_OUT: u32 = 16;

/// `Segment::role` of training rows.
pub const ROLE_TRAIN: u32 = 0;
/// `Segment::role` of held-out rows.
pub const ROLE_HELD_OUT: u32 = 1;

/// `Control::done` when an epoch made no mistake.
pub const STOP_CONVERGED: u32 = 1;
/// `Control::done` when the update fell under the tolerance.
pub const STOP_TOLERANCE: u32 = 2;
/// `Control::done` when the patience rule stopped training.
pub const STOP_PATIENCE: u32 = 3;

/// The `Params::flags` bits of `rule` (the data's own bits, weights and held-out rows, are
/// added by the resident set).
pub fn flags(rule: &BatchRule) -> u32 {
    let keep = match rule.keep {
        Keep::Nothing => 0,
        Keep::Pocket => FLAG_POCKET,
        Keep::Average => FLAG_AVERAGE,
        Keep::AveragePocket => FLAG_POCKET | FLAG_AVERAGE,
    };
    let update = match rule.update {
        Update::Additive => 0,
        Update::Multiplicative => FLAG_MULTIPLICATIVE,
    };
    keep | update
}

/// Mirrors `Segment` in batch.wgsl.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct Segment {
    pub n: u32,
    pub chunk_base: u32,
    pub wg_base: u32,
    pub chunk_rows: u32,
    pub role: u32,
    /// The segment's `margins` workgroups (sparse training: as many per-head bias sums).
    pub wgs: u32,
    /// Sparse training: the long columns `gather` gives a workgroup each.
    pub long_cols: u32,
    /// Sparse: the long rows the last workgroups of `margins` score.
    pub long_rows: u32,
}

/// Mirrors `Control` in batch.wgsl.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable, Default)]
pub struct Control {
    pub done: u32,
    pub epoch: u32,
    pub best: f32,
    pub best_epoch: u32,
    pub reference: f32,
    pub wait: u32,
    pub epochs: u32,
    pub updates: u32,
    pub pocket_updates: u32,
    pub _pad0: u32,
    pub _pad1: u32,
    pub _pad2: u32,
}

impl Control {
    /// The control word of a freshly bound data set.
    pub fn fresh() -> Control {
        Control {
            best: f32::INFINITY,
            reference: f32::INFINITY,
            ..Control::default()
        }
    }
}

/// Mirrors `WgStat` in batch.wgsl.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct WgStat {
    pub mistakes: u32,
    pub criterion: f32,
    pub held_out: u32,
    pub weighted: f32,
    pub rows: u32,
}

/// Mirrors `EpochOut` in batch.wgsl.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable, Default)]
pub struct EpochOut {
    pub mistakes: u32,
    pub criterion: f32,
    pub update_norm: f32,
    pub held_out: u32,
    pub weighted: f32,
    pub rows: u32,
    pub _pad1: u32,
    pub _pad2: u32,
}

/// Mirrors `StepParams` in steps.wgsl.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct StepParams {
    pub n: u32,
    pub d: u32,
    pub heads: u32,
    pub rule: u32,
    pub streams: u32,
    pub step_rows: u32,
    pub average: u32,
    pub part_rows: u32,
    pub tau: f32,
    pub eta: f32,
    pub bias: f32,
    pub max_steps: u32,
    pub weighted: u32,
    pub update: u32,
    pub update_c: f32,
    pub _pad2: u32,
}

/// Mirrors `StreamStat` in steps.wgsl.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable, Default)]
pub struct StreamStat {
    pub lo: u32,
    pub hi: u32,
    pub mistakes: u32,
    pub wrong_rows: u32,
    pub steps: u32,
    pub criterion: f32,
    pub weighted: f32,
    pub lanes: u32,
}

/// Mirrors `KParams` in kernel.wgsl.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct KParams {
    pub n: u32,
    pub m: u32,
    pub d: u32,
    pub kind: u32,
    pub gamma: f32,
    pub coef0: f32,
    pub degree: u32,
    pub bias2: f32,
}

/// Workgroup memory of `kscores`: the TJ x TD support-vector tile of f32 in kernel.wgsl.
pub const KERNEL_TILE_BYTES: u32 = 16 * 64 * 4;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{HeadRule, Kernel, MAX_HEADS};
    use naga::{Expression, Literal, Module, TypeInner};

    /// (WGSL name, Rust size, Rust field names and offsets) of a mirrored struct.
    macro_rules! rust_layout {
        ($t:ident { $($f:ident),* $(,)? }) => {
            (
                stringify!($t),
                std::mem::size_of::<$t>(),
                vec![$((stringify!($f), std::mem::offset_of!($t, $f))),*],
            )
        };
    }

    fn parse(src: &str) -> Module {
        naga::front::wgsl::parse_str(src).unwrap_or_else(|e| panic!("{}", e.emit_to_string(src)))
    }

    /// A Rust struct's name, size, and (field, offset) pairs.
    type Layout = (&'static str, usize, Vec<(&'static str, usize)>);

    fn check_layouts(module: &Module, mirrors: &[Layout]) {
        let mut layouter = naga::proc::Layouter::default();
        layouter.update(module.to_ctx()).unwrap();
        for (name, size, fields) in mirrors {
            let (handle, ty) = module
                .types
                .iter()
                .find(|(_, t)| t.name.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("struct {name} is not in the shader"));
            let TypeInner::Struct { members, .. } = &ty.inner else {
                panic!("{name} is not a struct in the shader");
            };
            assert_eq!(
                layouter[handle].size as usize, *size,
                "size of {name}: WGSL vs Rust"
            );
            let wgsl: Vec<(&str, usize)> = members
                .iter()
                .map(|m| (m.name.as_deref().unwrap_or("?"), m.offset as usize))
                .collect();
            assert_eq!(&wgsl, fields, "members and offsets of {name}: WGSL vs Rust");
        }
    }

    fn constant(module: &Module, name: &str) -> u32 {
        let (_, c) = module
            .constants
            .iter()
            .find(|(_, c)| c.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("constant {name} is not in the shader"));
        match module.global_expressions[c.init] {
            Expression::Literal(Literal::U32(v)) => v,
            ref e => panic!("constant {name} is not a u32 literal: {e:?}"),
        }
    }

    #[test]
    fn batch_structs_have_the_wgsl_layout() {
        let module = parse(&super::super::batch::batch_source(
            super::super::batch::LaneSums::Tree,
        ));
        check_layouts(
            &module,
            &[
                rust_layout!(Params {
                    d,
                    d_aug,
                    bias,
                    eta,
                    tol,
                    total_chunks,
                    total_wgs,
                    heads,
                    rule,
                    tau,
                    flags,
                    patience,
                    keep_fraction,
                    floor,
                    units,
                    ring,
                    own
                }),
                rust_layout!(Segment {
                    n,
                    chunk_base,
                    wg_base,
                    chunk_rows,
                    role,
                    wgs,
                    long_cols,
                    long_rows
                }),
                rust_layout!(Control {
                    done,
                    epoch,
                    best,
                    best_epoch,
                    reference,
                    wait,
                    epochs,
                    updates,
                    pocket_updates,
                    _pad0,
                    _pad1,
                    _pad2
                }),
                rust_layout!(WgStat {
                    mistakes,
                    criterion,
                    held_out,
                    weighted,
                    rows
                }),
                rust_layout!(EpochOut {
                    mistakes,
                    criterion,
                    update_norm,
                    held_out,
                    weighted,
                    rows,
                    _pad1,
                    _pad2
                }),
            ],
        );
    }

    #[test]
    fn steps_structs_and_codes_have_the_wgsl_values() {
        let module = parse(&super::super::steps::steps_source(
            super::super::batch::LaneSums::Tree,
        ));
        check_layouts(
            &module,
            &[
                rust_layout!(StepParams {
                    n,
                    d,
                    heads,
                    rule,
                    streams,
                    step_rows,
                    average,
                    part_rows,
                    tau,
                    eta,
                    bias,
                    max_steps,
                    weighted,
                    update,
                    update_c,
                    _pad2
                }),
                rust_layout!(StreamStat {
                    lo,
                    hi,
                    mistakes,
                    wrong_rows,
                    steps,
                    criterion,
                    weighted,
                    lanes
                }),
            ],
        );
        for (name, rule) in [
            ("RULE_BINARY", HeadRule::Binary),
            ("RULE_OVR", HeadRule::OneVsRest),
            ("RULE_MC_ALL", HeadRule::MulticlassAll),
            ("RULE_MC_ARGMAX", HeadRule::MulticlassArgmax),
        ] {
            assert_eq!(constant(&module, name), rule.code(), "{name}");
        }
        assert_eq!(
            constant(&module, "MAX_STEP") as usize,
            crate::steps::MAX_STEP
        );
        assert_eq!(
            constant(&module, "AROW_STEP") as usize,
            crate::steps::AROW_STEP
        );
        let arow = crate::steps::StepUpdate::Arow { r: 1.0 };
        assert_eq!(constant(&module, "UPDATE_AROW"), arow.code().0);
    }

    #[test]
    fn kernel_struct_has_the_wgsl_layout() {
        let module = parse(super::super::dual::KERNEL_WGSL);
        check_layouts(
            &module,
            &[rust_layout!(KParams {
                n,
                m,
                d,
                kind,
                gamma,
                coef0,
                degree,
                bias2
            })],
        );
    }

    #[test]
    fn batch_codes_and_limits_equal_the_rust_values() {
        let module = parse(&super::super::batch::batch_source(
            super::super::batch::LaneSums::Tree,
        ));
        assert_eq!(constant(&module, "MAX_HEADS") as usize, MAX_HEADS);
        for (name, rule) in [
            ("RULE_BINARY", HeadRule::Binary),
            ("RULE_OVR", HeadRule::OneVsRest),
            ("RULE_MC_ALL", HeadRule::MulticlassAll),
            ("RULE_MC_ARGMAX", HeadRule::MulticlassArgmax),
        ] {
            assert_eq!(constant(&module, name), rule.code(), "{name}");
        }
        use super::super::batch::{Entry, KT_MAX, KV_MAX, V_MAX};
        for (name, v) in [("V_MAX", V_MAX), ("KT_MAX", KT_MAX), ("KV_MAX", KV_MAX)] {
            assert_eq!(constant(&module, name), v, "{name}");
        }
        for e in Entry::ALL {
            let name = format!("E_{}", e.name().to_uppercase());
            assert_eq!(constant(&module, &name), e.code(), "{name}");
        }
        assert_eq!(constant(&module, "NE") as usize, Entry::ALL.len());
        assert_eq!(
            constant(&module, "LONG_WALK") as usize,
            super::super::batch::LONG_WALK
        );
        assert_eq!(
            constant(&module, "LONG_WGS") as usize,
            super::super::batch::LONG_WGS
        );
        let cats = [
            "X", "INDEX", "ROWS", "COEF", "PARTIAL", "WEIGHTS", "CONTROL",
        ];
        assert_eq!(cats.len(), crate::TRAFFIC_CATEGORIES.len());
        for (i, c) in cats.iter().enumerate() {
            assert_eq!(constant(&module, &format!("CAT_{c}")), i as u32, "CAT_{c}");
        }
        assert_eq!(constant(&module, "NCAT") as usize, cats.len());
        for (name, s) in [
            ("STORAGE_F32", crate::Storage::F32),
            ("STORAGE_F16", crate::Storage::F16),
            ("STORAGE_U8", crate::Storage::U8),
            ("STORAGE_I8", crate::Storage::I8),
        ] {
            assert_eq!(constant(&module, name), s.code(), "{name}");
        }
        for (name, flag) in [
            ("FLAG_POCKET", FLAG_POCKET),
            ("FLAG_AVERAGE", FLAG_AVERAGE),
            ("FLAG_MULTIPLICATIVE", FLAG_MULTIPLICATIVE),
            ("FLAG_WEIGHTS", FLAG_WEIGHTS),
            ("FLAG_HELD_OUT", FLAG_HELD_OUT),
            ("ROLE_TRAIN", ROLE_TRAIN),
            ("ROLE_HELD_OUT", ROLE_HELD_OUT),
            ("STOP_CONVERGED", STOP_CONVERGED),
            ("STOP_TOLERANCE", STOP_TOLERANCE),
            ("STOP_PATIENCE", STOP_PATIENCE),
        ] {
            assert_eq!(constant(&module, name), flag, "{name}");
        }
        let rule = |update, keep| BatchRule {
            update,
            keep,
            ..BatchRule::new(1.0, 0.0)
        };
        assert_eq!(flags(&rule(Update::Additive, Keep::Nothing)), 0);
        assert_eq!(flags(&rule(Update::Additive, Keep::Pocket)), FLAG_POCKET);
        assert_eq!(flags(&rule(Update::Additive, Keep::Average)), FLAG_AVERAGE);
        assert_eq!(
            flags(&rule(Update::Additive, Keep::AveragePocket)),
            FLAG_POCKET | FLAG_AVERAGE
        );
        assert_eq!(
            flags(&rule(Update::Multiplicative, Keep::Nothing)),
            FLAG_MULTIPLICATIVE
        );
    }

    #[test]
    fn kernel_codes_and_tile_equal_the_rust_values() {
        let module = parse(super::super::dual::KERNEL_WGSL);
        for (name, k) in [
            ("KERNEL_LINEAR", Kernel::Linear),
            (
                "KERNEL_POLY",
                Kernel::Poly {
                    degree: 2,
                    gamma: 1.0,
                    coef0: 0.0,
                },
            ),
            ("KERNEL_RBF", Kernel::Rbf { gamma: 1.0 }),
        ] {
            assert_eq!(constant(&module, name), k.code(), "{name}");
        }
        assert_eq!(
            constant(&module, "TJ") * constant(&module, "TD") * 4,
            KERNEL_TILE_BYTES
        );
    }
}
