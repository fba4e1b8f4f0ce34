//! `rosenblatt gen`: generated data sets written as CSV or LIBSVM.

use rosenblatt::data::synth::{self, SynthSpec};
use rosenblatt::data::Format;

use super::args::GenArgs;
use super::{check_outputs, write_output};

pub fn gen(a: GenArgs) -> anyhow::Result<()> {
    check_outputs(&[a.output.as_deref()], &[])?;
    let data = if a.kind == "committee" {
        synth::committee(a.n, a.p.unwrap_or(0), a.k, a.seed)?.0
    } else {
        let spec = SynthSpec {
            n: a.n,
            d: a.d.unwrap_or(0),
            margin: a.margin.unwrap_or(0.1),
            noise: a.noise,
            seed: a.seed,
        };
        match a.density {
            Some(p) => {
                let typical = (p.clamp(0.0, 1.0) / 3.0).sqrt() as f32;
                let spec = SynthSpec {
                    margin: a.margin.unwrap_or(0.1 * typical),
                    ..spec
                };
                synth::generate_sparse(&spec, p)?.data
            }
            None => synth::generate(&spec)?.data,
        }
    };
    write_output(a.output.as_deref(), |w| match a.format {
        Format::Libsvm => synth::write_libsvm(&data, w),
        _ => synth::write_csv(&data, w),
    })
}
