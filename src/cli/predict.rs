//! `rosenblatt predict` and `rosenblatt eval`: a saved model applied to data.

use rosenblatt_train::model::{Evaluation, Model};

use anyhow::Context;

use super::args::{EvalArgs, ExportArgs, PredictArgs};
use rosenblatt::Format;

use super::{
    check_outputs, load_data, load_options, select_backend, stage, write_output, Like, Voice,
};

/// `rosenblatt export`: the model as an ONNX graph, written atomically.
pub fn export(a: ExportArgs) -> anyhow::Result<()> {
    let model = Model::load(&a.model)?;
    check_outputs(&[Some(a.output.as_path())], &[&a.model])?;
    let bytes = rosenblatt_train::model::onnx::to_onnx(&model)?;
    let tmp = stage(&a.output, ".onnx", |w| w.write_all(&bytes))?;
    tmp.persist()
        .with_context(|| format!("cannot write {}", a.output.display()))?;
    note!(
        "{} model ({} classes, {} features) -> {} (ONNX, opset {}: input X, outputs label and scores)",
        model.kind().describe(),
        model.classes().len(),
        model.n_features(),
        a.output.display(),
        rosenblatt_train::model::onnx::OPSET
    );
    Ok(())
}

pub fn predict(a: PredictArgs) -> anyhow::Result<()> {
    let model = Model::load(&a.model)?;
    check_outputs(&[a.output.as_deref()], &[&a.model, &a.data])?;
    let opts = load_options(&a.data_args, Like::model(&model))?;
    if rosenblatt_core::data::format_of(&a.data, &opts)? == Some(Format::Vw) {
        return predict_streamed(&a, &model, &opts);
    }
    let ds = load_data(&a.data, &a.data_args, Like::model(&model))?;
    model.check_features(&ds)?;
    let sel = select_backend(&a.backend, Voice::Quiet)?;
    let raw = model.raw_scores(&ds, &*sel.backend)?;
    write_output(a.output.as_deref(), |w| {
        write_predictions(w, &model, &raw, a.margins)
    })
}

/// Vowpal Wabbit text of any size: read in blocks (as `train --stream` reads it), each
/// scored and written before the next, so the rows are never held. A bad line anywhere is
/// the run's error, and nothing is written to `-o` then.
fn predict_streamed(
    a: &PredictArgs,
    model: &Model,
    opts: &rosenblatt::LoadOptions,
) -> anyhow::Result<()> {
    let blocks = rosenblatt_core::data::stream(&a.data, opts)?;
    let sel = select_backend(&a.backend, Voice::Quiet)?;
    let mut failed = None;
    let written = write_output(a.output.as_deref(), |w| {
        for block in blocks {
            let raw = block.and_then(|b| {
                model.check_features(&b.data)?;
                model.raw_scores(&b.data, &*sel.backend)
            });
            match raw {
                Ok(raw) => write_predictions(w, model, &raw, a.margins)?,
                Err(e) => {
                    failed = Some(e);
                    return Err(std::io::Error::other("the input stopped"));
                }
            }
        }
        Ok(())
    });
    match failed {
        Some(e) => Err(e.into()),
        None => written,
    }
}

/// One line a row: the predicted class, and with `margins` the scores after it.
fn write_predictions(
    w: &mut dyn std::io::Write,
    model: &Model,
    raw: &[f32],
    margins: bool,
) -> std::io::Result<()> {
    let pred = model.predict(raw);
    let values = if model.is_binary() {
        model.decision_values(raw)
    } else {
        raw.to_vec()
    };
    for (p, s) in pred.iter().zip(values.chunks_exact(model.outputs())) {
        let name = &model.classes()[*p as usize];
        if margins {
            let s: Vec<String> = s.iter().map(f32::to_string).collect();
            writeln!(w, "{name}\t{}", s.join("\t"))?;
        } else {
            writeln!(w, "{name}")?;
        }
    }
    Ok(())
}

pub fn eval(a: EvalArgs) -> anyhow::Result<()> {
    let model = Model::load(&a.model)?;
    let like = Like {
        features: None,
        hashing: model.hashing(),
    };
    let sel = select_backend(&a.backend, Voice::Quiet)?;
    let opts = load_options(&a.data_args, like)?;
    let ev = if rosenblatt_core::data::format_of(&a.data, &opts)? == Some(Format::Vw) {
        // Vowpal Wabbit text of any size, in blocks: only each row's class and scores kept.
        let (mut truth, mut raw) = (Vec::new(), Vec::new());
        for block in rosenblatt_core::data::stream(&a.data, &opts)? {
            let b = block?;
            model.check_features(&b.data)?;
            truth.extend(model.class_indices(&b.data)?);
            raw.extend(model.raw_scores(&b.data, &*sel.backend)?);
        }
        if truth.is_empty() {
            return Err(rosenblatt::Error::data(&a.data, "empty file: no examples").into());
        }
        model.evaluation(&truth, &raw)
    } else {
        let ds = load_data(&a.data, &a.data_args, like)?;
        model.check_features(&ds)?;
        model.evaluate(&ds, &*sel.backend)?
    };
    if a.json {
        outln!("{}", serde_json::to_string(&ev)?);
    } else {
        print_eval(&ev)?;
    }
    Ok(())
}

fn print_eval(ev: &Evaluation) -> anyhow::Result<()> {
    outln!("n = {}, accuracy = {:.2}%", ev.n, 100.0 * ev.accuracy);
    if let (Some(p), Some(r), Some(f)) = (ev.precision, ev.recall, ev.f1) {
        outln!(
            "positive class {:?}: precision {:.4}, recall {:.4}, F1 {:.4}",
            ev.confusion.classes[1],
            p,
            r,
            f
        );
    }
    match ev.auc {
        Some(a) => outln!("AUC (from the decision values) = {a:.4}"),
        None if ev.precision.is_some() => outln!("AUC: undefined (the data has one class only)"),
        None => {}
    }
    outln!("confusion matrix (rows: true class, columns: predicted):");
    let c = &ev.confusion.classes;
    let w = c.iter().map(String::len).max().unwrap_or(1).max(8);
    out!("  {:>w$}", "");
    for name in c {
        out!(" {name:>w$}");
    }
    outln!();
    for (name, row) in c.iter().zip(&ev.confusion.matrix) {
        out!("  {name:>w$}");
        for v in row {
            out!(" {v:>w$}");
        }
        outln!();
    }
    if ev.precision.is_none() {
        outln!("per class:");
        outln!(
            "  {:>w$} {:>9} {:>9} {:>9} {:>8}",
            "class",
            "precision",
            "recall",
            "F1",
            "support",
            w = w
        );
        for m in &ev.per_class {
            outln!(
                "  {:>w$} {:>9.4} {:>9.4} {:>9.4} {:>8}",
                m.class,
                m.precision,
                m.recall,
                m.f1,
                m.support,
                w = w
            );
        }
        outln!(
            "  {:>w$} {:>9.4} {:>9.4} {:>9.4}",
            "macro",
            ev.macro_precision,
            ev.macro_recall,
            ev.macro_f1,
            w = w
        );
    }
    Ok(())
}
