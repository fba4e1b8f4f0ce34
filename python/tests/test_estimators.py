"""scikit-learn's own estimator checks, run on every estimator of the package."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from rosenblatt import KernelPerceptron, PassiveAggressiveClassifier, Perceptron

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
    out = {
        "check_sample_weight_equivalence_on_dense_data": why_weights,
        "check_sample_weight_equivalence_on_sparse_data": why_weights,
    }
    if isinstance(est, KernelPerceptron) or getattr(est, "algo", None) == "winnow":
        # (Winnow passes the sample-weight checks of scikit-learn 1.9, not those of 1.6.)
        return out
    # Not granted by scikit-learn: the open part of issue 30 (README, "Python").
    out["check_class_weight_classifiers"] = (
        "class weights 1000 : 0.0001 on the check's unscaled noisy blobs (max_iter=1000, "
        "n_iter_no_change=20): the heavy class is predicted for 74-96% of the test rows "
        "(binary: averaged 0.74, batch and pocket 0.78, online and voted 0.96; 3 classes: "
        "batch 0.62, online 0.84, averaged 0.94) where the check asks > 0.87. With the features "
        "scaled (scale='maxabs' or 'standard') every rule predicts it for 100%. Unscaled, the "
        "bias (the coordinate 1 of [x, 1], beside features of size 30) that the heavy class "
        "must move takes about 90 batch epochs to get there, after a 70-epoch plateau that the "
        "patience rule ends, and the average and the pocket keep the earlier vectors "
        "(scikit-learn's own SGDClassifier(loss='perceptron', average=True): 0.78); 3 classes: "
        "scikit-learn's one-vs-rest weighs only each class's own rows (the others weigh 1), "
        "the direct rule weighs a row's whole update"
    )
    return out


@parametrize_with_checks(
    [
        Perceptron(backend="cpu"),
        Perceptron("batch", backend="cpu"),
        Perceptron("online", backend="cpu"),
        Perceptron("pocket", backend="cpu"),
        Perceptron("voted", backend="cpu"),
        Perceptron("winnow", backend="cpu"),
        PassiveAggressiveClassifier(backend="cpu"),
        KernelPerceptron(backend="cpu"),
    ],
    expected_failed_checks=expected_failures,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
