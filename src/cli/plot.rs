//! `rosenblatt plot boundary|training|roc`: pictures of a model or a run.

use rosenblatt_core::error::Param;
use rosenblatt_train::model::Model;

use super::args::{PlotModelArgs, PlotTrainingArgs};
use super::{check_outputs, load_data, select_backend, Like, Voice};

fn plot_inputs(a: &PlotModelArgs) -> anyhow::Result<(Model, rosenblatt_core::data::Dataset)> {
    rosenblatt_app::plot::image_kind(&a.output)?;
    rosenblatt_app::plot::check_size((a.size.width, a.size.height))?;
    check_outputs(&[Some(&a.output)], &[&a.model, &a.data])?;
    let model = Model::load(&a.model)?;
    let ds = load_data(&a.data, &a.data_args.clone().into(), Like::model(&model))?;
    model.check_features(&ds)?;
    Ok((model, ds))
}

pub fn plot_boundary(a: PlotModelArgs) -> anyhow::Result<()> {
    let (model, ds) = plot_inputs(&a)?;
    let features = match a.features.as_deref() {
        Some([i, j]) if *i >= 1 && *j >= 1 => Some((i - 1, j - 1)),
        Some(f) => anyhow::bail!(rosenblatt::Error::InvalidParam {
            name: Param::PlotFeatures,
            value: f
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(","),
            reason: "must be two 1-based feature numbers, e.g. --features 1,3".into(),
        }),
        None => None,
    };
    let sel = select_backend(&a.backend, Voice::Quiet)?;
    rosenblatt_app::plot::boundary(
        &model,
        &ds,
        &*sel.backend,
        features,
        &a.output,
        (a.size.width, a.size.height),
    )?;
    outln!("boundary plot written to {}", a.output.display());
    Ok(())
}

pub fn plot_training(a: PlotTrainingArgs) -> anyhow::Result<()> {
    rosenblatt_app::plot::image_kind(&a.output)?;
    rosenblatt_app::plot::check_size((a.size.width, a.size.height))?;
    check_outputs(&[Some(&a.output)], &[&a.run])?;
    let report = rosenblatt_app::plot::load_report(&a.run)?;
    rosenblatt_app::plot::training(&report, &a.output, (a.size.width, a.size.height))?;
    outln!("training plot written to {}", a.output.display());
    Ok(())
}

pub fn plot_roc(a: PlotModelArgs) -> anyhow::Result<()> {
    let (model, ds) = plot_inputs(&a)?;
    let sel = select_backend(&a.backend, Voice::Quiet)?;
    rosenblatt_app::plot::roc(
        &model,
        &ds,
        &*sel.backend,
        &a.output,
        (a.size.width, a.size.height),
    )?;
    outln!("ROC plot written to {}", a.output.display());
    Ok(())
}
