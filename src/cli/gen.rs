//! `rosenblatt gen`: generated data sets written as CSV or LIBSVM; `rosenblatt convert`: text
//! data to a float32 .npy that training memory-maps.

use rosenblatt_core::data::synth::{self, SynthSpec};
use rosenblatt_core::data::Format;

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use rosenblatt_core::data::{convert as conv, LoadOptions};
use rosenblatt_core::output::temp_beside;

use super::args::{ConvertArgs, GenArgs};
use super::errors::usage;
use super::{check_outputs, stage, write_output};

pub fn gen(a: GenArgs) -> anyhow::Result<()> {
    check_outputs(&[a.output.as_deref()], &[])?;
    if a.kind == "clicks" {
        if !(0.0..=0.5).contains(&a.noise) {
            return Err(usage(
                "--noise",
                &format!("must be in [0, 0.5], but is {}", a.noise),
            ));
        }
        use rosenblatt_core::data::clicks::{write_clicks, ClickText};
        let text = match a.format {
            None | Some(Format::Vw) => ClickText::Vw,
            Some(Format::Csv) => ClickText::Csv,
            Some(_) => {
                return Err(usage(
                    "--format",
                    "must be vw (the default) or csv for clicks",
                ))
            }
        };
        return write_output(a.output.as_deref(), |w| {
            write_clicks(a.n, a.noise, a.seed, text, w)
        });
    }
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
    write_output(a.output.as_deref(), |w| {
        match a.format.unwrap_or(Format::Csv) {
            Format::Libsvm => synth::write_libsvm(&data, w),
            Format::Vw => synth::write_vw(&data, w),
            _ => synth::write_csv(&data, w),
        }
    })
}

pub fn convert(a: ConvertArgs) -> anyhow::Result<()> {
    let labels_out = a.labels_out.clone().unwrap_or_else(|| {
        let stem = a.output.with_extension("");
        PathBuf::from(format!("{}.labels.npy", stem.display()))
    });
    check_outputs(
        &[Some(a.output.as_path()), Some(labels_out.as_path())],
        &[a.data.as_path()],
    )?;
    let opts = LoadOptions {
        format: a.format,
        label_col: a.label_col.clone(),
        features: a.features,
        ..Default::default()
    };
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new_spinner();
        b.set_message("rows converted");
        b
    });
    let mut progress = |rows: usize| {
        if let Some(b) = &bar {
            b.set_position(rows as u64);
            b.tick();
        }
    };
    let mut tmp = temp_beside(&a.output, ".npy")
        .with_context(|| format!("cannot create {}", a.output.display()))?;
    let done = conv::to_npy(&a.data, &opts, tmp.as_file_mut(), &a.output, &mut progress)?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    // The labels are staged first, then both files are renamed into place.
    let labels_tmp = match &done.labels {
        Some(l) => Some(stage(&labels_out, ".npy", |w| conv::write_labels(l, w))?),
        None => None,
    };
    tmp.persist()
        .with_context(|| format!("cannot write {}", a.output.display()))?;
    if let Some(t) = labels_tmp {
        t.persist()
            .with_context(|| format!("cannot write {}", labels_out.display()))?;
    }
    note!(
        "{} rows x {} features -> {} (float32, memory-mapped by train, predict and eval){}",
        done.n,
        done.d,
        a.output.display(),
        match &done.labels {
            Some(_) => format!(
                "; labels -> {} (train with --labels {})",
                labels_out.display(),
                labels_out.display()
            ),
            None => String::new(),
        }
    );
    Ok(())
}
