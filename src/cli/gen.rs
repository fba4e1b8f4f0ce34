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
            margin: a.margin,
            noise: a.noise,
            seed: a.seed,
        };
        synth::generate(&spec)?.data
    };
    write_output(a.output.as_deref(), |w| match a.format {
        Format::Libsvm => synth::write_libsvm(&data, w),
        _ => synth::write_csv(&data, w),
    })
}
