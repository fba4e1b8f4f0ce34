//! `rosenblatt demo`: the README's main job. Generates a 2-D set and a larger separable set,
//! trains them, and prints what happened next to what the theory promises.

use rosenblatt_backend::cpu::CpuBackend;
use rosenblatt_core::data::synth::{self, SynthSpec};
use rosenblatt_core::params::{Algo, TrainParams};
use rosenblatt_train::algo;

use super::args::DemoArgs;
use super::train::epoch_list;
use super::{select_backend, Bar, Voice};

pub fn run(a: DemoArgs) -> anyhow::Result<()> {
    let sel = select_backend(&a.backend, Voice::Speaks)?;
    let cpu = CpuBackend::new();
    outln!("rosenblatt demo: perceptrons on generated linearly separable data");
    outln!(
        "backend: {} ({})",
        sel.backend.kind().name(),
        sel.backend.device()
    );
    outln!();

    let sets = [
        (
            "2-D, 200 points, margin 0.1",
            SynthSpec {
                n: 200,
                d: 2,
                margin: 0.1,
                noise: 0.0,
                seed: a.seed,
            },
        ),
        (
            "larger set, margin 0.05",
            SynthSpec {
                n: a.n,
                d: a.d,
                margin: 0.05,
                noise: 0.0,
                seed: a.seed + 1,
            },
        ),
    ];
    for (title, spec) in sets {
        let s = synth::generate(&spec)?;
        outln!("== {title}: n = {}, d = {} ==", spec.n, spec.d);
        let r_star = rosenblatt_train::report::radius(&s.data.x, s.data.d, 1.0);
        let bound_star = (r_star / s.margin_augmented).powi(2);
        for algo in [Algo::Online, Algo::Batch] {
            let params = TrainParams::for_algo(algo).seed(a.seed).validate()?;
            let mut bar = Bar::new(Voice::Speaks);
            let t = algo::train(&s.data, &params, &*sel.backend, Some(&cpu), &mut bar);
            bar.finish();
            let r = t?.report;
            outln!(
                "  {:<6} on {}: {} epochs, {}, accuracy {:.2}%, {:.3} s",
                r.algo,
                r.backend,
                r.epochs,
                if r.converged {
                    "converged"
                } else {
                    "not converged"
                },
                100.0 * r.train_accuracy.unwrap_or(0.0),
                r.seconds
            );
            outln!(
                "         mistakes {} (per epoch: {})",
                r.total_mistakes,
                epoch_list(&r.mistakes_per_epoch)
            );
            if let (Some(g), Some(b)) = (r.margin, r.mistake_bound) {
                outln!(
                    "         R = {:.3}, achieved margin {:.3e}, (R/gamma)^2 = {:.3e}",
                    r.radius,
                    g,
                    b
                );
            }
            if let Some(note) = r.fallback {
                outln!("         note: {note}");
            }
        }
        outln!(
            "  Novikoff with the generator's margin gamma* = {:.4}: online mistakes <= (R/gamma*)^2 = {:.0}",
            s.margin_augmented, bound_star
        );
        outln!();
    }
    outln!(
        "Try: rosenblatt gen --n 1000 --d 2 -o data.csv && rosenblatt train data.csv -o model.json"
    );
    Ok(())
}
