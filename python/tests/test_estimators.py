"""scikit-learn's own estimator checks, run on every estimator of the package."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from rosenblatt import (
    AROWClassifier,
    KernelPerceptron,
    PassiveAggressiveClassifier,
    Perceptron,
)

ONLINE = ("online", "averaged", "voted", "winnow", "pa")


def expected_failures(est):
    """Checks that test a property these rules do not have, with the reason."""
    online = getattr(est, "algo", "kernel") in ONLINE or isinstance(est, KernelPerceptron)
    why_weights = (
        "the online updates see repeated rows one after another in a shuffled order, a "
        "weighted row once: another sequence of updates"
        if online
        else "a row of weight k adds k * y x, rounded once in f32, where k repeated rows add "
        "y x k times: the models agree to about 1e-5, not to the check's 1e-7"
    )
    # (Winnow passes the sample-weight checks of scikit-learn 1.9, not those of 1.6.)
    return {
        "check_sample_weight_equivalence_on_dense_data": why_weights,
        "check_sample_weight_equivalence_on_sparse_data": why_weights,
    }


@parametrize_with_checks(
    [
        Perceptron(backend="cpu"),
        Perceptron(algo="batch", backend="cpu"),
        Perceptron(algo="online", backend="cpu"),
        Perceptron(algo="pocket", backend="cpu"),
        Perceptron(algo="voted", backend="cpu"),
        Perceptron(algo="winnow", backend="cpu"),
        Perceptron(algo="multiclass", backend="cpu"),
        Perceptron(multiclass="ovr", backend="cpu"),
        Perceptron(algo="batch", multiclass="ovr", backend="cpu"),
        PassiveAggressiveClassifier(backend="cpu"),
        PassiveAggressiveClassifier(multiclass="ovr", backend="cpu"),
        AROWClassifier(backend="cpu"),
        KernelPerceptron(backend="cpu"),
    ],
    expected_failed_checks=expected_failures,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
