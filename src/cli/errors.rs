//! Library errors as the command line shows them: typed parameters become flag names
//! (`Param::LearningRate` -> `--lr`), errors get the hint that names the flag to change, and
//! every error gets its exit code (2 for the user's input or parameters, 1 for the rest).

use rosenblatt_core::error::{Error, Param};

/// The flag that sets `p`.
pub fn flag(p: Param) -> &'static str {
    match p {
        Param::Algo => "--algo",
        Param::Epochs => "--epochs",
        Param::LearningRate => "--lr",
        Param::Tolerance => "--tol",
        Param::MarginThreshold => "--margin-threshold",
        Param::MaxVectors => "--max-vectors",
        Param::Minibatch => "--minibatch",
        Param::Streams => "--streams",
        Param::Mode => "--mode",
        Param::Degree => "--degree",
        Param::Gamma => "--gamma",
        Param::Coef0 => "--coef0",
        Param::Rows => "--n",
        Param::Features => "--d",
        Param::Margin => "--margin",
        Param::Noise => "--noise",
        Param::Experts => "--p",
        Param::Panel => "--k",
        Param::LabelColumn => "--label-col",
        Param::PlotFeatures => "--features",
        Param::ImagePath => "-o",
        Param::AnimationPath => "--animate",
        Param::ImageWidth => "--width",
        Param::ImageHeight => "--height",
        Param::Patience => "--patience",
        Param::MinImprovement => "--min-improvement",
        Param::PatienceFloor => "--patience-floor",
        Param::ValidationFraction => "--validation-fraction",
        Param::ClassWeight => "--class-weight",
        Param::SampleWeight => "--sample-weights",
        Param::WeightColumn => "--weight-col",
        Param::Categorical => "--categorical",
        Param::Scale => "--scale",
        Param::Density => "--density",
        Param::Aggressiveness => "--aggressiveness",
        Param::ArowR => "--arow-r",
        Param::ArowCovariance => "--arow-covariance",
        Param::MulticlassUpdate => "--multiclass-update",
    }
}

/// An image-path error from the library, as one about `flag` (for the commands where the
/// image is not `-o`).
pub fn flag_error(e: Error, flag: &'static str) -> anyhow::Error {
    match e {
        Error::InvalidParam {
            name: Param::ImagePath,
            value,
            reason,
        } => anyhow::anyhow!(FlagError {
            text: format!("{flag} {reason}, but is {value}"),
        }),
        other => other.into(),
    }
}

/// A usage error about `flag` (exit 2): "FLAG TEXT".
pub fn usage(flag: &str, text: &str) -> anyhow::Error {
    anyhow::anyhow!(FlagError {
        text: format!("{flag} {text}"),
    })
}

/// A message that already names its flag; an input error (exit 2).
#[derive(Debug)]
struct FlagError {
    text: String,
}

impl std::fmt::Display for FlagError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for FlagError {}

/// Processes of a data-parallel run that would do different things (exit 2); the first
/// process says so itself before any ends (mpirun ends the others as soon as one exits), so
/// the error is not printed again.
#[derive(Debug)]
struct Disagreement {
    text: String,
}

impl std::fmt::Display for Disagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Disagreement {}

/// A [`Disagreement`] error.
pub fn disagreement(text: String) -> anyhow::Error {
    anyhow::anyhow!(Disagreement { text })
}

/// Whether `e` is a disagreement between processes.
pub fn is_disagreement(e: &anyhow::Error) -> bool {
    e.downcast_ref::<Disagreement>().is_some()
}

/// Whether `e` is to be printed (every error but a disagreement, said already).
pub fn printed(e: &anyhow::Error) -> bool {
    !is_disagreement(e)
}

/// What the user reads after "error: ".
pub fn message(e: &anyhow::Error) -> String {
    let Some(le) = e.downcast_ref::<Error>() else {
        return format!("{e:#}");
    };
    match le {
        Error::InvalidParam {
            name,
            value,
            reason,
        } => format!("{} {reason}, but is {value}", flag(*name)),
        Error::TooLarge(m) => format!("{m}; use --backend cpu"),
        Error::VotedLimit(cap) => format!(
            "--max-vectors {cap} was reached: the voted perceptron keeps one vector per mistake; \
             raise it, lower --epochs, or use --algo averaged"
        ),
        Error::BinaryOnly { .. } => {
            format!("{le}; use --algo multiclass (or online, batch, pocket, averaged)")
        }
        _ => format!("{e:#}"),
    }
}

/// 2 for the user's input or parameters, 1 for everything else.
pub fn exit_code(e: &anyhow::Error) -> i32 {
    if e.downcast_ref::<FlagError>().is_some() || is_disagreement(e) {
        return 2;
    }
    match e.downcast_ref::<Error>() {
        Some(le) if le.is_input_error() => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_shown_with_their_flags() {
        let e = rosenblatt_core::params::TrainParams::for_algo(rosenblatt::Algo::Batch)
            .lr(2.0)
            .validate()
            .unwrap_err();
        let e = anyhow::Error::from(e);
        assert_eq!(message(&e), "--lr should be in (0, 1], but is 2");
        assert_eq!(exit_code(&e), 2);
        let e = anyhow::Error::from(Error::VotedLimit(7));
        assert!(message(&e).starts_with("--max-vectors 7 was reached"));
    }
}
