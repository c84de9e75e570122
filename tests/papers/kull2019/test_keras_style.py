"""Kull et al.'s Keras-trained layers and Valk's scipy vector scaling, each against its
reference procedure written out here on a small seeded case."""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from calbench.calibrators import make_calibrator
from calbench.papers.kull2019.keras_style import reference_softmax


def _holdout_plan(method: dict):
    """The plan of a holdout cell (3 inner folds, averaged) of ``method``, built by hand."""
    from calbench.runner.plan import plan_cell
    from calbench.runner.spec import CellSpec

    protocol = {"name": "holdout", "inner_folds": 3, "average_inner_models": True}
    loss, shift = {"name": "zero_one"}, {"name": "none"}
    return plan_cell(CellSpec("t", 15, {}, method, {"name": "nll"}, loss, shift, protocol, {}))


def _data(n=300, k=3, seed=0, confidently_wrong=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)) + 3.0 * np.eye(k)[y]
    logits[:20] *= 8.0  # confident rows, where Keras's clip at 1e-7 binds
    # ... and where they are wrong, a true-class probability below 1e-7: its gradient
    # vanishes under the clip, not under the logits' loss
    y[:confidently_wrong] = (y[:confidently_wrong] + 1) % k
    return logits.astype(np.float32).astype(np.float64), y


def _keras_fit_written_out(
    x, y, *, l2, mu, odir, lr, epochs, patience, seed, double_fit, clip=True
):
    """Keras 2.2's ``model.fit`` of Dirichlet_NN, step by step, in float64 with torch's
    autograd for the gradient: np.random.seed(seed) then one permutation per epoch, batches
    of 128, loss = mean sparse CE on clip(softmax, 1e-7, 1 - 1e-7) + l2 * (off-)diagonal
    squares + mu * bias squares, Adam with lr_t = lr sqrt(1 - b2^t) / (1 - b1^t) and eps
    1e-7, early stopping on the epoch's mean loss, then (double_fit) the same at lr / 10
    from the result with a fresh Adam. ``clip=False``: Keras 2.3 and TensorFlow 2's Keras,
    whose backend hands a softmax layer's logits to sparse_softmax_cross_entropy_with_logits
    instead."""
    np.random.seed(seed)  # noqa: NPY002 -- the global generator, as their constructors seed it
    n, k = x.shape
    x, labels = torch.tensor(x, dtype=torch.float64), torch.tensor(y)
    weights = torch.eye(k, dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(k, dtype=torch.float64, requires_grad=True)
    mask = 1 - torch.eye(k, dtype=torch.float64) if odir else torch.ones(k, k)

    def fit(lr):
        m = [torch.zeros_like(weights), torch.zeros_like(bias)]
        v = [torch.zeros_like(weights), torch.zeros_like(bias)]
        best, wait, t = np.inf, 0, 0
        for _ in range(epochs):
            order = np.arange(n)
            np.random.shuffle(order)  # noqa: NPY002 -- as Keras 2.2 shuffles
            total = 0.0
            for start in range(0, n, 128):
                i = torch.from_numpy(order[start : start + 128])
                logit = x[i] @ weights.T + bias
                if clip:
                    logit = torch.softmax(logit, dim=1).clamp(1e-7, 1 - 1e-7).log()
                ce = -torch.log_softmax(logit, dim=1)[torch.arange(len(i)), labels[i]]
                loss = ce.mean() + l2 * ((weights * mask) ** 2).sum() + mu * (bias**2).sum()
                grads = torch.autograd.grad(loss, [weights, bias])
                t += 1
                rate = lr * np.sqrt(1 - 0.999**t) / (1 - 0.9**t)
                with torch.no_grad():
                    for j, (param, g) in enumerate(zip([weights, bias], grads, strict=True)):
                        m[j] = 0.9 * m[j] + 0.1 * g
                        v[j] = 0.999 * v[j] + 0.001 * g * g
                        param -= rate * m[j] / (v[j].sqrt() + 1e-7)
                total += float(loss.detach()) * len(i)
            if total / n < best:
                best, wait = total / n, 0
            else:
                wait += 1
                if wait >= patience:
                    break

    fit(lr)
    if double_fit:
        fit(lr / 10)
    return weights.detach().numpy(), bias.detach().numpy()


@pytest.mark.parametrize(
    "l2,mu,odir,clip",
    [(0.01, 0.001, True, True), (0.05, 0.05, False, True), (0.01, 0.001, True, False)],
    ids=["odir", "l2", "odir_keras_2_3_loss"],
)
def test_keras_layer_follows_the_keras_procedure(l2, mu, odir, clip):
    logits, y = _data(confidently_wrong=0 if clip else 5)
    settings = dict(l2=l2, mu=mu, odir=odir, lr=0.05, epochs=40, patience=2, seed=15)
    expected = _keras_fit_written_out(logits, y, **settings, double_fit=True, clip=clip)
    fitted = make_calibrator(
        "keras_ms",
        l2=l2,
        mu=mu,
        regularization="odir" if odir else "l2",
        lr=0.05,
        max_epochs=40,
        patience=2,
        seed=15,
        loss_clip=1e-7 if clip else None,
    ).fit(logits, y)
    if not clip:  # the clip binds on the confidently wrong rows: the two losses fit apart
        other = _keras_fit_written_out(logits, y, **settings, double_fit=True, clip=True)
        assert np.abs(other[0] - expected[0]).max() > 1e-3
    # float32 against float64 over ~150 Adam steps: agreement to a few 1e-5
    np.testing.assert_allclose(fitted.coef_, expected[0], atol=5e-5)
    np.testing.assert_allclose(fitted.intercept_, expected[1], atol=5e-5)
    assert fitted.n_epochs_[0] < 40  # early stopping did act


def test_a_grid_of_replicas_equals_separate_fits():
    logits, y = _data()
    points = [{"l2": 0.01, "mu": 0.001}, {"l2": 1.0, "mu": "auto"}, {"l2": 0.1, "seed": 3}]
    base = make_calibrator("keras_dir", max_epochs=25, patience=4)
    together = base.fit_grid(logits, y, points)
    for point, model in zip(points, together, strict=True):
        alone = make_calibrator("keras_dir", max_epochs=25, patience=4, **point).fit(logits, y)
        np.testing.assert_allclose(model.coef_, alone.coef_, atol=1e-6)
        assert model.n_epochs_ == alone.n_epochs_
        np.testing.assert_allclose(
            model.predict_proba(logits), alone.predict_proba(logits), atol=1e-6
        )


@pytest.mark.parametrize("name", ["keras_dir", "keras_ms", "keras_vs"])
def test_inner_folds_trained_as_one_batch_are_each_folds_fit_bit_for_bit(name):
    # Four folds, three of 224 rows (one batch; one of them not a kfold part) and one of 225
    # (its own); two penalties and two seeds a fold, replicas stopping early at different
    # epochs: each (fold, point) equals fit_grid on that fold's rows alone.
    logits, y = _data(n=299, k=4, seed=2)
    folds = [np.setdiff1d(np.arange(299), part) for part in np.array_split(np.arange(299), 4)]
    folds[1] = np.sort(np.random.default_rng(0).permutation(299)[:224])  # not a kfold part
    points = [{"l2": 0.01, "mu": 0.001}, {"l2": 0.3, "seed": 4}]
    base = make_calibrator(name, lr=0.05, max_epochs=30, patience=2)
    together = base.fit_grid_folds(logits, y, folds, points)
    assert [len(f) for f in folds] == [224, 224, 224, 225]
    for fold, models in zip(folds, together, strict=True):
        alone = base.fit_grid(logits[fold], y[fold], points)
        for model, single in zip(models, alone, strict=True):
            np.testing.assert_array_equal(model.coef_, single.coef_)
            np.testing.assert_array_equal(model.intercept_, single.intercept_)
            assert model.n_epochs_ == single.n_epochs_
    stopped = {model.n_epochs_ for models in together for model in models}
    assert len(stopped) > 1 or name == "keras_vs"  # VecS ran all 30 epochs in every replica
    assert not np.array_equal(together[0][0].coef_, together[1][0].coef_)


def test_dirichlet_input_is_their_clipped_log_of_their_global_max_softmax():
    logits = np.array([[0.0, 1.0, 2.0], [-120.0, -30.0, -20.0], [-300.0, -299.0, -250.0]])
    probs = reference_softmax(logits)
    assert probs.dtype == np.float32 and probs[1, 0] == 0.0  # 122 below the array's max
    assert np.isnan(probs[2]).all()  # the whole row underflows: 0 / 0 in their code
    eps = np.float32(np.finfo(float).eps)  # their clip, in Keras's float32
    x = make_calibrator("keras_dir")._inputs(logits)
    assert x[1, 0] == np.log(eps)
    np.testing.assert_allclose(x[:2], np.log(np.maximum(probs[:2], eps)), rtol=1e-6)
    # where theirs has no number, the row's own softmax
    own = np.clip([np.exp(-50.0), np.exp(-49.0), 1.0], eps, 1)
    np.testing.assert_allclose(x[2], np.log(own), rtol=1e-5)


def test_bfgs_vector_scaling_is_their_scipy_procedure():
    """experiments_dnn's scipy VectorScaling (Valk's VS), written out: BFGS with numeric
    gradients on the clipped, renormalised log-loss of their global-max softmax."""
    logits, y = _data(n=400)
    k = logits.shape[1]

    def their_softmax(z):
        e = np.exp(z - np.max(z))
        return e / e.sum(axis=1, keepdims=1)

    def loss(x):
        p = their_softmax(np.dot(logits.astype(np.float32), np.diag(x[:k])) + x[k:])
        p = np.clip(p, 1e-15, 1 - 1e-15)
        p /= p.sum(axis=1, keepdims=True)
        return -np.mean(np.log(p[np.arange(len(y)), y]))

    x0 = np.concatenate([np.repeat(1, k), np.repeat(0, k)])
    opt = minimize(loss, x0=x0, options={"maxiter": 100}, method="BFGS")
    fitted = make_calibrator("bfgs_vs").fit(logits, y)
    np.testing.assert_array_equal(fitted.coef_, opt.x[:k])
    np.testing.assert_array_equal(fitted.intercept_, opt.x[k:])
    expected = their_softmax(np.dot(logits, np.diag(opt.x[:k])) + opt.x[k:])
    np.testing.assert_allclose(fitted.predict_proba(logits), expected, atol=1e-15)
    # Not quite the optimum that calbench's vs reaches (numeric gradients):
    assert np.abs(opt.x - np.concatenate(_optimum(logits, y))).max() > 1e-6


def _optimum(logits, y):
    fitted = make_calibrator("vs").fit(logits, y)
    return fitted.coef_, fitted.intercept_


def test_inner_cv_over_a_batched_grid_is_the_one_by_one_choice():
    """select_and_fit trains a Keras-style grid as one batch per inner fold; the choice and
    the averaged fold models equal the search written out point by point."""
    from sklearn.model_selection import KFold

    from calbench.metrics import log_loss
    from calbench.runner.selection import select_and_fit

    logits, y = _data(n=400)
    base = make_calibrator("keras_ms", max_epochs=15, patience=3, lr=0.02)
    grid = {"l2": [1e-3, 10.0], "mu": [1e-3, 1.0]}
    model, chosen = select_and_fit(
        base, grid, logits, y, inner_folds=3, average_inner_models=True, seed=15, inner_cv="kfold"
    )
    splits = list(KFold(3, shuffle=True, random_state=15).split(logits))
    scores, members = {}, {}
    for l2 in grid["l2"]:
        for mu in grid["mu"]:
            out_of_fold = np.empty((len(y), 3))
            fitted = []
            for fit, held in splits:
                one = make_calibrator("keras_ms", max_epochs=15, patience=3, lr=0.02, l2=l2, mu=mu)
                fitted.append(one.fit(logits[fit], y[fit]))
                out_of_fold[held] = fitted[-1].predict_proba(logits[held])
            scores[(l2, mu)], members[(l2, mu)] = log_loss(out_of_fold, y), fitted
    best = min(scores, key=scores.get)
    assert (chosen["l2"], chosen["mu"]) == best
    expected = np.mean([m.predict_proba(logits) for m in members[best]], axis=0)
    np.testing.assert_allclose(model.predict_proba(logits), expected, atol=1e-6)


def test_a_method_with_the_authors_tuned_values_runs_only_where_they_published_them():
    from calbench.errors import CalbenchError

    method = {
        "name": "ms_odir_kull_keras_tuned",
        "calibrator": "keras_ms",
        "params": {"seed": 15},
        "tuned": {"c10_densenet40": {"l2": 250.0, "mu": 1e-4}},
    }
    plan = _holdout_plan(method)
    assert plan.tuned_params("c10_densenet40") == {"l2": 250.0, "mu": 1e-4}
    dataset = type("Named", (), {"name": "c10_densenet40", "n_classes": 10, "true_map": None})
    calibrator, _ = plan.calibrator(dataset, plan.task(None, 10))
    assert (calibrator.seed, calibrator.l2, calibrator.mu) == (15, 250.0, 1e-4)
    with pytest.raises(CalbenchError, match="published none for 'svhn_resnet152_SD'"):
        plan.tuned_params("svhn_resnet152_SD")


def test_a_method_can_say_it_was_fitted_once_whatever_the_protocol():
    """Kull et al. averaged their ODIR maps' fold models but fitted VecS once on the whole
    calibration set: ``average_inner_models`` in a method config overrides the protocol's."""
    from calbench.metrics import log_loss
    from calbench.runner.cell import fit_selected
    from calbench.runner.selection import AveragedCalibrator

    logits, y = _data(n=200)
    vs = {"name": "vs", "calibrator": "vs"}
    averaged, _ = fit_selected(_holdout_plan(vs), make_calibrator("vs"), {}, logits, y, log_loss)
    once, _ = fit_selected(
        _holdout_plan({**vs, "average_inner_models": False}),
        make_calibrator("vs"),
        {},
        logits,
        y,
        log_loss,
    )
    assert isinstance(averaged, AveragedCalibrator) and len(averaged.members) == 3
    assert not isinstance(once, AveragedCalibrator)
