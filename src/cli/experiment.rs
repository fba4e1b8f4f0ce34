//! `rosenblatt experiment committee`: the online perceptron against Winnow.

use rosenblatt::params::TrainParams;

use super::args::CommitteeArgs;

pub fn committee(a: CommitteeArgs) -> anyhow::Result<()> {
    TrainParams::default().lr(a.lr).validate()?;
    let rows = rosenblatt::experiment::committee_experiment(&a.p, a.k, a.n, a.lr, a.seed)?;
    if a.json {
        outln!(
            "{}",
            serde_json::json!({ "k": a.k, "n": a.n, "lr": a.lr, "rows": rows })
        );
        return Ok(());
    }
    outln!(
        "committee: p experts vote ±1, the label is the majority of a hidden panel of k = {}; one pass over {} examples",
        a.k, a.n
    );
    outln!(
        "{:>8} {:>20} {:>22} {:>16}",
        "p",
        "perceptron mistakes",
        "bound (p+1)k",
        "Winnow mistakes"
    );
    for r in &rows {
        outln!(
            "{:>8} {:>20} {:>22} {:>16}",
            r.p,
            r.perceptron_mistakes,
            r.perceptron_bound,
            r.winnow_mistakes
        );
    }
    if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
        if rows.len() > 1 {
            let more = |a: u64, b: u64| b as i64 - a as i64;
            let (dp, dw) = (
                more(first.perceptron_mistakes, last.perceptron_mistakes),
                more(first.winnow_mistakes, last.winnow_mistakes),
            );
            let holds = last.winnow_mistakes < last.perceptron_mistakes && dw < dp;
            outln!(
                "from p = {} to p = {}: perceptron mistakes {:+} (x{:.1}), Winnow mistakes {:+} (x{:.1})",
                first.p,
                last.p,
                dp,
                last.perceptron_mistakes as f64 / first.perceptron_mistakes.max(1) as f64,
                dw,
                last.winnow_mistakes as f64 / first.winnow_mistakes.max(1) as f64,
            );
            outln!(
                "{}",
                if holds {
                    "-> Winnow makes fewer mistakes and they grow more slowly with p, as the lecture notes claim"
                } else {
                    "-> the claim that Winnow's mistakes grow more slowly with p does NOT hold here"
                }
            );
        }
    }
    Ok(())
}
