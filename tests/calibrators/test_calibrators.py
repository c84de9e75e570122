"""Calibrators against worked examples, closed forms and peer implementations."""

import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize, minimize_scalar
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold

from calbench.calibrators import CALIBRATORS, make_calibrator
from calbench.calibrators.registry import imported_calibrator
from calbench.errors import CalbenchError
from calbench.simplex import log_softmax, probs_to_logits, softmax
from tests.calibrators.own_calibrator import OWN_CALIBRATOR
from tests.conftest import overconfident_logits
from tests.papers.valk2022.test_reference_dec import SMALL_DEC
from tests.papers.valk2022.test_reference_forest import SMALL_FOREST
from tests.papers.valk2022.test_reference_iop import SMALL_IOP
from tests.papers.valk2022.test_reference_knn import SMALL_KNN

PACKAGE = Path(__file__).parents[2] / "calbench"


def _nll(probs, y):
    return -np.log(probs[np.arange(len(y)), y]).mean()


def test_temperature_scaling_worked_example_valk_2_5_2():
    # z = (6, 4, 2) with t = 2 gives about (0.67, 0.24, 0.09); t = 0.5 gives (0.98, 0.02, 0.00).
    ts = make_calibrator("ts").fit(np.array([[6.0, 4, 2], [2, 4, 6]]), [0, 2])
    ts.log_temperature_ = np.log(2.0)
    np.testing.assert_allclose(
        ts.predict_proba(np.array([[6.0, 4, 2]])), [[0.67, 0.24, 0.09]], atol=0.005
    )
    ts.log_temperature_ = np.log(0.5)
    np.testing.assert_allclose(
        ts.predict_proba(np.array([[6.0, 4, 2]])), [[0.98, 0.02, 0.00]], atol=0.005
    )


def test_temperature_matches_one_dimensional_search(rng):
    z, y = overconfident_logits(rng, 4000, 10)
    ts = make_calibrator("ts").fit(z, y)
    ref = minimize_scalar(
        lambda t: _nll(softmax(z / t), y),
        bounds=(0.05, 20),
        method="bounded",
        options={"xatol": 1e-10},
    )
    assert ts.temperature_ > 1.2  # over-confident logits need t > 1
    assert ts.temperature_ == pytest.approx(ref.x, rel=1e-5)


def test_temperature_fast_path_is_the_generic_fit(rng, monkeypatch):
    """At 100 classes TS evaluates its one-parameter log-loss and slope in torch; the
    generic chain rule (numpy, the (n, k) gradient) fits the same temperature, and a
    written-out slope agrees with its derivative."""
    from calbench.calibrators.scaling import temperature as scaling

    z, y = overconfident_logits(rng, 3000, 100)
    assert z.size >= scaling.TORCH_MIN_ENTRIES
    fast = make_calibrator("ts").fit(z, y)
    term = fast._data_term(None, z, y)
    value, grads = term({"log_temperature_": np.asarray(0.3)})
    beta = np.exp(-0.3)
    assert value == pytest.approx(_nll(softmax(z * beta), y), rel=1e-12)
    step = 1e-6
    numeric = _nll(softmax(z * np.exp(-0.3 - step)), y) - _nll(softmax(z * np.exp(-0.3 + step)), y)
    assert grads["log_temperature_"] == pytest.approx(numeric / (2 * step), rel=1e-6)
    monkeypatch.setattr(scaling, "TORCH_MIN_ENTRIES", 10**12)
    generic = make_calibrator("ts").fit(z, y)
    assert fast.temperature_ == pytest.approx(generic.temperature_, rel=1e-9)


def test_temperature_matches_netcal(rng):
    netcal_scaling = pytest.importorskip("netcal.scaling")
    z, y = overconfident_logits(rng, 3000, 5)
    ours = make_calibrator("ts").fit(z, y).predict_proba(z)
    peer = netcal_scaling.TemperatureScaling()
    peer.fit(softmax(z), y)
    np.testing.assert_allclose(ours, peer.transform(softmax(z)), atol=2e-4)


@pytest.mark.parametrize("solver", ["newton", "lbfgs"])
def test_dir_l2_is_multinomial_logistic_regression_on_log_probs(rng, solver):
    z, y = overconfident_logits(rng, 2000, 4)
    reg_lambda = 1e-3
    ours = make_calibrator("dir_l2", reg_lambda=reg_lambda, tol=1e-10, solver=solver).fit(z, y)
    # sklearn minimises 0.5 ||W||^2 + C sum_i loss_i: the same model when C = 1 / (2 n lambda).
    peer = LogisticRegression(C=1 / (2 * len(y) * reg_lambda), tol=1e-12, max_iter=10_000)
    peer.fit(log_softmax(z), y)
    np.testing.assert_allclose(ours.predict_proba(z), peer.predict_proba(log_softmax(z)), atol=1e-6)
    # The default tolerance stops earlier, still well within what any metric resolves.
    default = make_calibrator("dir_l2", reg_lambda=reg_lambda, solver=solver).fit(z, y)
    np.testing.assert_allclose(
        default.predict_proba(z), peer.predict_proba(log_softmax(z)), atol=1e-3
    )


def test_newton_reaches_the_optimum_on_probabilities_with_exact_zeros(rng):
    # A tree-like classifier: many exact zeros, so ln(2.2e-308) = -708 among the features.
    z, y = overconfident_logits(rng, 1500, 5)
    probs = softmax(z)
    probs[probs < 0.05] = 0.0
    probs /= probs.sum(axis=1, keepdims=True)
    x = probs_to_logits(probs)
    reg_lambda = 1e-4
    ours = make_calibrator("dir_l2", reg_lambda=reg_lambda).fit(x, y)
    assert ours.n_iter_ < 60
    # scikit-learn's own Newton solver (its L-BFGS stops short here, at a higher objective).
    peer = LogisticRegression(
        C=1 / (2 * len(y) * reg_lambda), tol=1e-12, max_iter=1000, solver="newton-cholesky"
    )
    peer.fit(log_softmax(x), y)
    np.testing.assert_allclose(ours.predict_proba(x), peer.predict_proba(log_softmax(x)), atol=1e-8)


def _odir_objective(theta, x, y, k, lam, mu):
    w, b = theta[: k * k].reshape(k, k), theta[k * k :]
    probs = softmax(x @ w.T + b)
    off = (w**2).sum() - (np.diag(w) ** 2).sum()
    return _nll(probs, y) + lam * off / (k * (k - 1)) + mu * (b**2).sum() / k


@pytest.mark.parametrize("name", ["dir_odir", "ms_odir"])
def test_odir_minimises_kull_objective(rng, name):
    # Independent check: plain numpy objective of Kull sec. 3, minimised by BFGS with
    # finite-difference gradients, reaches the same map.
    k, lam, mu = 3, 0.5, 0.2
    z, y = overconfident_logits(rng, 600, k)
    ours = make_calibrator(name, reg_lambda=lam, reg_mu=mu).fit(z, y)
    x = log_softmax(z) if name == "dir_odir" else z
    theta0 = np.concatenate([np.eye(k).ravel(), np.zeros(k)])
    ref = minimize(
        _odir_objective, theta0, args=(x, y, k, lam, mu), method="BFGS", options={"gtol": 1e-9}
    )
    theta = np.concatenate([ours.coef_.ravel(), ours.intercept_])
    assert _odir_objective(theta, x, y, k, lam, mu) <= ref.fun + 1e-9
    w, b = ref.x[: k * k].reshape(k, k), ref.x[k * k :]
    np.testing.assert_allclose(ours.predict_proba(z), softmax(x @ w.T + b), atol=1e-4)


#: (lambda, mu) of the start tests: Kull's weakest and strongest grid corners, and the
#: default strength (None), where the off-diagonal penalty pins the weights.
_STRENGTHS = [(1e-2, 1e-2), (1e3, 1e3), (None, None)]


@pytest.mark.parametrize("name", ["dir_odir", "ms_odir"])
@pytest.mark.parametrize(("lam", "mu"), _STRENGTHS)
@pytest.mark.parametrize(
    "start",  # the two forced starts in the slow suite (4 s each); "auto" picks one of them
    [
        "auto",
        pytest.param("diagonal", marks=pytest.mark.slow),
        pytest.param("temperature", marks=pytest.mark.slow),
    ],
)
def test_every_lbfgs_start_reaches_the_minimum_the_identity_start_reaches(
    rng, name, lam, mu, start
):
    """Above 36 classes L-BFGS fits the map; where it starts moves the answer only within
    the optimiser's tolerance (the objective is convex)."""
    z, y = _many_classes(rng, 1600, 40)
    strengths = {} if lam is None else {"reg_lambda": lam, "reg_mu": mu}
    fit, test = slice(0, 800), slice(800, None)
    plain = make_calibrator(name, start="identity", **strengths).fit(z[fit], y[fit])
    ours = make_calibrator(name, start=start, **strengths).fit(z[fit], y[fit])
    # The defaults' row-sum pull stiffens the objective: L-BFGS stops within 2e-7 of it.
    assert ours.loss_ <= plain.loss_ + 2e-7
    a, b = ours.predict_proba(z[test]), plain.predict_proba(z[test])
    held_out = _nll(np.clip(a, 1e-300, 1), y[test]), _nll(np.clip(b, 1e-300, 1), y[test])
    assert held_out[0] == pytest.approx(held_out[1], rel=1e-3)
    if lam != 1e-2:
        # The weakest corner nearly separates the 800 samples with 1640 weights (training
        # log-loss 0.018, held-out 18): flat directions leave test rows free to differ.
        np.testing.assert_allclose(a, b, atol=2e-3)


def test_the_diagonal_start_is_the_minimum_over_diagonal_maps(rng):
    """`diagonal_minimum` against the plain numpy objective of Kull sec. 3 with W held
    diagonal, minimised by BFGS from finite differences."""
    from calbench.calibrators.solvers.diagonal import diagonal_minimum

    k, lam, mu = 4, 3.0, 0.5
    z, y = overconfident_logits(rng, 500, k)
    cal = make_calibrator("ms_odir", reg_lambda=lam, reg_mu=mu)
    cal._resolve_strengths(*z.shape)
    cal.reg_diagonal_ = 0.0
    terms = (cal._penalty_weights(k), np.zeros((k, k + 1)), (0.0, 0.0))
    d, b = diagonal_minimum(z, y, 2.0, terms, tol=1e-9, max_iter=500)

    def restricted(theta):
        return _odir_objective(
            np.concatenate([np.diag(theta[:k]).ravel(), theta[k:]]), z, y, k, lam, mu
        )

    ref = minimize(
        restricted, np.r_[np.ones(k), np.zeros(k)], method="BFGS", options={"gtol": 1e-9}
    )
    assert restricted(np.r_[d, b]) <= ref.fun + 1e-10
    np.testing.assert_allclose(np.r_[d, b], ref.x, atol=1e-4)


def test_auto_starts_at_the_diagonal_only_where_the_penalty_pins_the_rest(rng):
    from calbench.calibrators.solvers.diagonal import DIAGONAL_START_RATIO, diagonal_dominates

    z, _ = _many_classes(rng, 400, 40)
    weights = np.zeros((40, 41))
    p = softmax(z)
    curvature = np.mean((p * (1 - p)).sum(axis=1) * (z**2).sum(axis=1)) / 40**2
    for factor, pinned in [(0.5, False), (2.0, True)]:
        weights[:, :40] = factor * DIAGONAL_START_RATIO * curvature
        assert diagonal_dominates(z, z, 1.0, weights) is pinned
    assert not diagonal_dominates(z, z, 1.0, np.zeros((40, 41)))


@pytest.mark.parametrize(
    ("name", "lam", "mu"),
    [
        ("dir_odir", lambda n, k: (k * (k - 1)) ** 2 / (2 * n), lambda n, k: k**2 / (2 * n)),
        ("ms_odir", lambda n, k: (k * (k - 1)) ** 2 / (2 * n), lambda n, k: k**2 / (2 * n)),
        ("dir_l2", lambda n, k: 5 * k / n, lambda n, k: 0.0),
    ],
)
def test_default_strengths_are_the_documented_rule(rng, name, lam, mu):
    z, y = overconfident_logits(rng, 600, 4)
    ours = make_calibrator(name).fit(z, y)
    assert ours.reg_lambda_ == pytest.approx(lam(600, 4)) and ours.reg_mu_ == mu(600, 4)
    strengths = {"reg_lambda": lam(600, 4), "reg_mu": mu(600, 4)}
    # The pulls the defaults add (their own tests below).
    strengths["reg_row_sum"] = ours.row_pull_[0]
    if name.endswith("odir"):
        strengths["reg_diagonal"] = ours.reg_diagonal_
    else:
        strengths["shrink_to"] = "temperature"
    given = make_calibrator(name, **strengths).fit(z, y)
    np.testing.assert_allclose(ours.predict_proba(z), given.predict_proba(z), atol=1e-12)


def _many_classes(rng, n, k):
    """Over-confident logits (temperature 2.5) with more matrix weights than samples."""
    u = rng.normal(size=(n, k))
    u[np.arange(n), rng.integers(0, k, n)] += np.log(k) + 1.5
    y = np.array([rng.choice(k, p=p) for p in softmax(u)])
    return 2.5 * u, y


def test_default_matrix_scaling_is_sensible_where_unpenalised_is_not(rng):
    # 40 classes, 600 fitting samples: 1600 weights. Unpenalised, the fit separates the
    # data and its test log-loss is far above the uncalibrated one; the default strength
    # keeps the map near the temperature-scaled one.
    z, y = _many_classes(rng, 1200, 40)
    fit, test = slice(0, 600), slice(600, None)

    def test_loss(model):
        probs = np.clip(model.fit(z[fit], y[fit]).predict_proba(z[test]), 1e-300, 1)
        return _nll(probs, y[test])

    uncalibrated = _nll(softmax(z[test]), y[test])
    ts = test_loss(make_calibrator("ts"))
    assert test_loss(make_calibrator("ms_odir", reg_lambda=0.0, reg_mu=0.0, max_iter=300)) > (
        uncalibrated + 1.0
    )
    assert test_loss(make_calibrator("ms_odir")) < min(uncalibrated, ts + 0.15)


def _shared_or_own_scales(rng, n, k, scales):
    """Labels drawn from ``softmax(u)``; the net reports ``u * scales`` (one per class), so
    temperature scaling is right where the scales are equal and per-class scales are not."""
    u = rng.normal(size=(n, k))
    u[np.arange(n), rng.integers(0, k, n)] += np.log(k) + 1.0
    y = np.array([rng.choice(k, p=p) for p in softmax(u)])
    return u * scales, y


@pytest.mark.parametrize("name", ["ms_odir", "dir_odir"])
def test_the_default_diagonal_is_held_where_classes_share_one_scale(rng, name):
    # 60 classes, 1500 rows: 25 a class, as at ImageNet shape. One shared over-confidence
    # (2.5): the free diagonal fits each class's noise; the chosen pull holds it at 1 / T.
    z, y = _shared_or_own_scales(rng, 3000, 60, 2.5)
    fit, test = slice(0, 1500), slice(1500, None)
    ours = make_calibrator(name).fit(z[fit], y[fit])
    free = make_calibrator(name, reg_diagonal=0.0).fit(z[fit], y[fit])
    ts = make_calibrator("ts").fit(z[fit], y[fit])
    assert min(ours.diagonal_scores_, key=ours.diagonal_scores_.get) >= 10
    held_out = {m: _nll(m.predict_proba(z[test]), y[test]) for m in (ours, free, ts)}
    assert held_out[ours] < held_out[free] - 0.005
    assert held_out[ours] < _nll(softmax(z[test]), y[test])
    assert np.diag(ours.coef_).std() < np.diag(free.coef_).std() / 3


def test_the_default_diagonal_is_free_where_classes_differ(rng):
    # Four classes, 500 rows each, over-confident by 0.5, 1, 2 and 4: only per-class scales
    # can calibrate them, and the choice leaves them free (Kull's ODIR).
    z, y = _shared_or_own_scales(rng, 4000, 4, np.array([0.5, 1.0, 2.0, 4.0]))
    ours = make_calibrator("ms_odir").fit(z[:2000], y[:2000])
    assert ours.reg_diagonal_ <= 4**2 / (2 * 2000)
    scores = ours.diagonal_scores_
    assert scores[100.0] > scores[0.0] + 0.01
    diagonal = np.diag(ours.coef_)
    assert diagonal[0] / diagonal[3] > 4  # the truth: 8


def test_diagonal_scores_are_the_held_out_loss_of_the_diagonal_map(rng):
    """Each score: the diagonal map ``softmax(z * d + b)`` minimising the written-out
    objective on the seeded 80% (BFGS from finite differences), scored on the other 20%."""
    from calbench.calibrators.solvers.diagonal import DIAGONAL_HOLDOUT, DIAGONAL_STRENGTHS

    k, n = 5, 400
    z, y = _shared_or_own_scales(rng, n, k, np.array([1.0, 1.5, 2.0, 2.5, 3.0]))
    ours = make_calibrator("ms_odir").fit(z, y)
    order = np.random.default_rng(0).permutation(n)
    cut = n - round(DIAGONAL_HOLDOUT * n)
    fit, held = order[:cut], order[cut:]
    unit, center = k**2 / (2 * cut), 1 / ours.temperature_
    # The row-sum pull: the intercept's weight times the mean square of a row's mean logit.
    row_weight = unit / k * np.mean(z.mean(axis=1) ** 2)
    assert ours.row_pull_ == pytest.approx((row_weight * cut / n, center))

    def objective(theta, multiple):
        d, b = theta[:k], theta[k:]
        loss = _nll(softmax(z[fit] * d + b), y[fit])
        pull = (multiple * unit / k + row_weight) * ((d - center) ** 2).sum()
        return loss + pull + unit / k * (b**2).sum()

    assert list(ours.diagonal_scores_) == list(DIAGONAL_STRENGTHS)
    for multiple, score in ours.diagonal_scores_.items():
        start = np.r_[np.full(k, center), np.zeros(k)]
        theta = minimize(objective, start, args=(multiple,), method="BFGS").x
        expected = _nll(softmax(z[held] * theta[:k] + theta[k:]), y[held])
        assert score == pytest.approx(expected, abs=1e-5)
    best = min(ours.diagonal_scores_.values())
    chosen = next(m for m in DIAGONAL_STRENGTHS if ours.diagonal_scores_[m] == best)
    assert ours.reg_diagonal_ == pytest.approx(chosen * k**2 / (2 * n))


def test_default_l2_pulls_towards_temperature_scaling_where_kulls_pulls_to_zero(rng):
    """The written-out objective: mean log-loss + lambda * sum (W - I / T)^2 + lambda *
    m * sum_i (sum_j w_ij - 1/T)^2, lambda = 5k/n, T temperature scaling's fit, m the mean
    square of a row's mean ln p; given a strength, Kull's L2 (towards 0, no row pull)."""
    k, n = 4, 600
    z, y = overconfident_logits(rng, n, k)
    ours = make_calibrator("dir_l2").fit(z, y)
    inverse_t = 1 / make_calibrator("ts").fit(z, y).temperature_
    x = log_softmax(z)
    lam = 5 * k / n
    row_weight = lam * np.mean(x.mean(axis=1) ** 2)

    def objective(theta, center, rows):
        w, b = theta[: k * k].reshape(k, k), theta[k * k :]
        pull = lam * ((w - center) ** 2).sum() + rows * ((w.sum(axis=1) - inverse_t) ** 2).sum()
        return _nll(softmax(x @ w.T + b), y) + pull

    start = np.r_[np.eye(k).ravel(), np.zeros(k)]
    for model, center, rows in [
        (ours, inverse_t * np.eye(k), row_weight),
        (make_calibrator("dir_l2", reg_lambda=lam).fit(z, y), np.zeros((k, k)), 0.0),
    ]:
        ref = minimize(objective, start, args=(center, rows), method="BFGS", options={"gtol": 1e-8})
        theta = np.r_[model.coef_.ravel(), model.intercept_]
        assert objective(theta, center, rows) <= ref.fun + 1e-9
        np.testing.assert_allclose(theta[: k * k], ref.x[: k * k], atol=1e-4)


@pytest.mark.parametrize(
    "name",
    ["dir_odir", pytest.param("dir_l2", marks=pytest.mark.slow)],  # dir_l2: 5 s
)
def test_the_defaults_pulls_are_one_objective_for_newton_and_lbfgs(rng, name):
    # 40 classes: L-BFGS by default; Newton on request. Both carry the diagonal, row-sum
    # and temperature pulls of the defaults, so they reach the same map.
    z, y = _many_classes(rng, 800, 40)
    by_lbfgs = make_calibrator(name, tol=1e-9).fit(z, y)
    by_newton = make_calibrator(name, solver="newton").fit(z, y)
    assert by_lbfgs.row_pull_[0] > 0
    assert by_lbfgs.row_pull_ == by_newton.row_pull_
    assert by_lbfgs.loss_ == pytest.approx(by_newton.loss_, abs=1e-8)
    np.testing.assert_allclose(by_lbfgs.predict_proba(z), by_newton.predict_proba(z), atol=1e-4)


def test_given_strengths_leave_the_diagonal_free_as_kull(rng):
    z, y = overconfident_logits(rng, 600, 4)
    given = make_calibrator("dir_odir", reg_lambda=1.0, reg_mu=1.0).fit(z, y)
    assert given.reg_diagonal_ == 0.0 and given.diagonal_scores_ is None
    with pytest.raises(CalbenchError, match="regularization='l2' has no free diagonal"):
        make_calibrator("dir_l2", reg_diagonal=1.0).fit(z, y)


def test_float32_products_of_large_matrix_fits_move_no_printed_digit(rng, monkeypatch):

    from calbench.calibrators.matrix import matrix_scaling as matrix

    z, y = _many_classes(rng, 1500, 40)
    exact = make_calibrator("ms_odir").fit(z[:1000], y[:1000])
    monkeypatch.setattr(matrix, "FLOAT32_PRODUCTS", 0)
    lowered = make_calibrator("ms_odir").fit(z[:1000], y[:1000])
    assert lowered._fitting_features(z).dtype == np.float32
    a, b = exact.predict_proba(z[1000:]), lowered.predict_proba(z[1000:])
    # The two fits stop at L-BFGS iterates a little apart (numpy 2.4.6 with OpenBLAS 0.3.31
    # moves 3 of 20000 probabilities by 1.1e-4); what is printed, the test log-loss to the
    # fourth decimal, stays.
    np.testing.assert_allclose(a, b, atol=5e-4)
    assert abs(_nll(a, y[1000:]) - _nll(b, y[1000:])) < 5e-5


def _ref_row_objective(raw, x, y, k, lam):
    """Kull et al.'s dirichlet_python at 6c750d9 (ref_row=True): every row of the free
    [W | b] minus the last one, lambda times the sum of their squares, no 1/k."""
    a = raw.reshape(k, k + 1)
    a = a - a[-1]
    probs = softmax(x @ a[:, :k].T + a[:, k])
    return _nll(probs, y) + lam * (a**2).sum()


def test_reference_class_l2_minimises_kulls_uci_objective(rng):
    k, lam = 4, 0.05
    z, y = overconfident_logits(rng, 500, k)
    ours = make_calibrator(
        "dir_l2", reg_lambda=lam, penalise_intercept=True, reference_class=True
    ).fit(z, y)
    assert np.allclose(ours.coef_[-1], 0) and ours.intercept_[-1] == 0  # the reference row
    x = log_softmax(z)
    raw0 = np.hstack([np.eye(k), np.zeros((k, 1))]).ravel()
    ref = minimize(
        _ref_row_objective, raw0, args=(x, y, k, lam), method="BFGS", options={"gtol": 1e-10}
    )
    a = ref.x.reshape(k, k + 1)
    a = a - a[-1]
    np.testing.assert_allclose(ours.predict_proba(z), softmax(x @ a[:, :k].T + a[:, k]), atol=1e-6)
    assert ours.loss_ == pytest.approx(ref.fun, abs=1e-9)
    # The class-symmetric default penalty is another objective, with another optimum.
    plain = make_calibrator("dir_l2", reg_lambda=lam, penalise_intercept=True).fit(z, y)
    assert np.abs(plain.predict_proba(z) - ours.predict_proba(z)).max() > 1e-3
    with pytest.raises(CalbenchError, match="needs the Newton solver"):
        make_calibrator("dir_l2", reference_class=True, solver="lbfgs").fit(z, y)


def test_strong_odir_leaves_only_the_diagonal(rng):
    z, y = overconfident_logits(rng, 1000, 5)
    cal = make_calibrator("dir_odir", reg_lambda=1e6, reg_mu=1e6).fit(z, y)
    off = cal.coef_ - np.diag(np.diag(cal.coef_))
    assert np.abs(off).max() < 1e-3 and np.abs(cal.intercept_).max() < 1e-3
    assert np.diag(cal.coef_).min() < 0.9  # still learns to cool the over-confident scores


@pytest.mark.parametrize("name", ["ts", "bcts", "vs"])
def test_scaling_maps_are_stationary_points(rng, name):
    z, y = overconfident_logits(rng, 1500, 4)
    cal = make_calibrator(name).fit(z, y)
    params = {n: np.asarray(getattr(cal, n), dtype=float) for n in cal._initial_params(4)}
    flat = np.concatenate([p.ravel() for p in params.values()])

    def objective(theta):
        out, i = {}, 0
        for n, p in params.items():
            out[n] = theta[i : i + p.size].reshape(p.shape)
            i += p.size
        t = np.exp(out.get("log_temperature_", 0.0))
        scale = out.get("coef_", 1.0)
        return _nll(softmax(z * scale / t + out.get("intercept_", 0.0)), y)

    eps = 1e-6
    grad = [
        (objective(flat + eps * e) - objective(flat - eps * e)) / (2 * eps)
        for e in np.eye(len(flat))
    ]
    assert np.abs(grad).max() < 1e-5


def test_dirichlet_on_synthetic_beats_temperature(synthetic):
    ds = synthetic
    c = ds.true_map(ds.probs_test)
    errs = {}
    for name in ["ts", "dir"]:
        p = make_calibrator(name).fit(ds.logits_cal, ds.y_cal).predict_proba(ds.logits_test)
        errs[name] = np.abs(p - c).mean()
    assert errs["dir"] < 0.6 * errs["ts"]


def test_true_map_has_zero_error_and_needs_a_map(synthetic):
    cal = make_calibrator("true_map", true_map=synthetic.true_map)
    p = cal.fit(synthetic.logits_cal, synthetic.y_cal).predict_proba(synthetic.logits_test)
    np.testing.assert_array_equal(p, synthetic.true_map(synthetic.probs_test))
    with pytest.raises(CalbenchError, match="true calibration map"):
        make_calibrator("true_map").fit(synthetic.logits_cal, synthetic.y_cal)


#: Reference procedures whose defaults take minutes (thousands of trees, a million Adam
#: steps, 4096 neighbours): the contracts hold at any size.
SMALL = {
    "valk_forest": SMALL_FOREST,
    "valk_dec": SMALL_DEC,
    "valk_knn": SMALL_KNN,
    "rahimi_iop_diag": SMALL_IOP,
}


def _instance(name, synthetic):
    return (
        make_calibrator(name, true_map=synthetic.true_map)
        if name == "true_map"
        else make_calibrator(name, **SMALL.get(name, {}))
    )


#: Contracts of the trained maps (Keras-style layers, IOP, DEC: 3 to 6 s each) run in the
#: slow suite; their reference tests stay quick.
SLOW_CONTRACTS = {"keras_dir", "keras_ms", "keras_vs", "iop_full", "iop_diag", "dec"}

#: Every registered calibrator, and a user's own named as ``module:Class``: the shared
#: contract holds for both routes.
CONTRACT_NAMES = [*sorted(CALIBRATORS), OWN_CALIBRATOR]


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_CONTRACTS else n for n in CONTRACT_NAMES],
)
def test_contract(name, synthetic, rng):
    """Every registered calibrator and a user's own (``module:Class``): simplex rows, clone,
    idempotent refit, extreme logits."""
    x, y = synthetic.logits_cal[:1500], synthetic.y_cal[:1500]
    cal = _instance(name, synthetic)
    first = cal.fit(x, y).predict_proba(synthetic.logits_test[:2000])
    assert first.shape == (2000, 3)
    assert (first >= 0).all() and np.allclose(first.sum(axis=1), 1, atol=1e-9)
    again = cal.fit(x, y).predict_proba(synthetic.logits_test[:2000])
    np.testing.assert_allclose(again, first, rtol=0, atol=1e-12)
    cloned = clone(cal)
    assert cloned.get_params().keys() == cal.get_params().keys()
    extreme = rng.normal(size=(50, 3)) * 800
    if name != "true_map":
        p = cal.predict_proba(extreme)
        assert np.isfinite(p).all() and np.allclose(p.sum(axis=1), 1)


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_CONTRACTS else n for n in CONTRACT_NAMES],
)
def test_parameters_are_unchanged_by_fit(name, synthetic):
    """scikit-learn's ``check_estimators_overwrite_params`` on scores calbench accepts (its
    own data have fewer columns than labels): ``fit`` leaves every constructor parameter as
    given (by joblib's hash, as scikit-learn compares them); what it learns or resolves goes
    in attributes ending in ``_``."""
    import joblib

    cal = _instance(name, synthetic)
    before = {k: joblib.hash(v) for k, v in cal.get_params(deep=False).items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal.fit(synthetic.logits_cal[:600], synthetic.y_cal[:600])
    after = {k: joblib.hash(v) for k, v in cal.get_params(deep=False).items()}
    assert [k for k in before if before[k] != after.get(k)] == []


@pytest.mark.parametrize("name", ["ts", "dir_l2", "dir_odir"])
def test_works_inside_grid_search(name, synthetic):
    grid = {"tol": [1e-6, 1e-8]} if name == "ts" else {"reg_lambda": [1e-3, 1.0]}
    search = GridSearchCV(
        make_calibrator(name),
        grid,
        scoring="neg_log_loss",
        cv=StratifiedKFold(3, shuffle=True, random_state=0),
    )
    search.fit(synthetic.logits_cal[:900], synthetic.y_cal[:900])
    assert np.isfinite(search.best_score_)


def test_every_calibrator_has_a_config_and_back():
    """Each method file builds its calibrator as a run does (`method`: ``${seed}`` filled, a
    tuned method's parameters for one of its data sets) and its grid names parameters of
    it. That Hydra composes every file is test_configs' (each composed once there)."""
    from calbench.calibrators.methods import method, method_configs

    configs = method_configs()
    files = [*PACKAGE.glob("conf/method/*.yaml"), *PACKAGE.glob("papers/*/conf/method/*.yaml")]
    assert set(configs) == {p.stem for p in files}
    used = {c["calibrator"] for c in configs.values()}
    assert set(CALIBRATORS) <= used, f"no conf/method file for {set(CALIBRATORS) - used}"
    for stem, conf in configs.items():
        assert conf["name"] == stem
        tuned = next(iter(conf.get("tuned") or {}), None)
        cal, grid = method(stem, dataset=tuned)
        assert set(conf.get("grid") or {}) <= set(cal.get_params()), stem
        assert set(grid) <= set(cal.get_params()), stem


def test_unknown_name_and_parameter_are_clear():
    with pytest.raises(
        CalbenchError, match=r"Unknown method 'tss' \(did you mean 'ts'\?\); known: .*vs"
    ):
        make_calibrator("tss")
    with pytest.raises(CalbenchError, match=r"did you mean 'spline_gupta'\?"):
        make_calibrator("spline_gupt")  # method variants are names too
    with pytest.raises(CalbenchError, match="no parameter.*'temp'"):
        make_calibrator("ts", temp=2)
    with pytest.raises(CalbenchError, match="fixed by the name"):
        make_calibrator("dir_l2", regularization="odir")


def test_fit_rejects_bad_input():
    with pytest.raises(CalbenchError, match="NaN or infinite"):
        make_calibrator("ts").fit(np.array([[0.0, np.nan], [1, 2]]), [0, 1])
    with pytest.raises(CalbenchError, match="outside 0..1"):
        make_calibrator("ts").fit(np.zeros((2, 2)), [0, 5])
    cal = make_calibrator("ts").fit(np.zeros((2, 2)), [0, 1])
    with pytest.raises(CalbenchError, match="fitted on 2 classes"):
        cal.predict_proba(np.zeros((2, 3)))


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from([n for n in CONTRACT_NAMES if n != "true_map"]),
    scale=st.floats(0.01, 300),
    seed=st.integers(0, 2**16),
)
def test_outputs_stay_on_the_simplex_for_any_logits(name, scale, seed):
    """Property: whatever the logits' scale, outputs are finite rows summing to 1."""
    gen = np.random.default_rng(seed)
    z = gen.normal(size=(120, 4)) * scale
    y = np.arange(120) % 4
    small = {
        "knn_kl": {"n_neighbors": 16},
        "knn_euc": {"n_neighbors": 16},
        "forest": {"n_trees": 10},
        **SMALL,
    }
    cal = make_calibrator(name, **small.get(name, {}))
    p = cal.fit(z, y).predict_proba(gen.normal(size=(60, 4)) * scale)
    assert np.isfinite(p).all() and (p >= 0).all()
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-9)


def _bad_values(rule):
    from calbench.calibrators.constraints import AutoOr, Choice, Flag, NoneOr

    if isinstance(rule, Flag):
        return [1, "yes"]
    if isinstance(rule, Choice):
        return ["nosuch", 1, None]
    if isinstance(rule, AutoOr | NoneOr):
        return _bad_values(rule.rule)
    bad = ["abc", True]
    if rule.low is not None:
        bad.append(rule.low - 1 if not rule.strict else rule.low)
    if rule.integer:
        bad.append(10.7)
    return bad


@pytest.mark.parametrize("name", CONTRACT_NAMES)
def test_every_constrained_parameter_rejects_bad_values_before_fitting(name):
    from calbench.calibrators.constraints import CONSTRAINTS

    calibrator = make_calibrator(name) if name != "compose" else None
    if calibrator is None:
        pytest.skip("compose's parameters are its steps'")
    z = np.zeros((6, 3))
    y = np.array([0, 1, 2, 0, 1, 2])
    # the shared constraints and the class's own (string options declared as Choice)
    table = {**CONSTRAINTS, **calibrator._parameter_constraints}
    constrained = [p for p in calibrator.get_params(deep=False) if p in table]
    for param in constrained:
        for value in _bad_values(table[param]):
            with pytest.raises(CalbenchError, match=f"The '{param}' parameter of .* must be"):
                clone(calibrator).set_params(**{param: value}).fit(z, y)


def test_a_users_own_calibrator_by_import_path(tmp_path, monkeypatch):
    (tmp_path / "own_cal.py").write_text(
        "from calbench.calibrators import Calibrator\n"
        "from calbench.simplex import softmax\n"
        "class Hot(Calibrator):\n"
        "    def __init__(self, t=2.0):\n"
        "        self.t = t\n"
        "    def _fit(self, logits, y):\n"
        "        pass\n"
        "    def _predict_proba(self, logits):\n"
        "        return softmax(logits / self.t)\n"
        "class NotOne:\n"
        "    pass\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    z = np.array([[2.0, 0.0, 0.0], [0.0, 4.0, 0.0]])
    hot = make_calibrator("own_cal:Hot", t=4.0).fit(z, [0, 1])
    np.testing.assert_allclose(hot.predict_proba(z), softmax(z / 4.0))
    with pytest.raises(CalbenchError, match="not a calbench.calibrators.Calibrator subclass"):
        make_calibrator("own_cal:NotOne")
    with pytest.raises(CalbenchError, match="cannot import calibrator 'own_cal:Nope'"):
        make_calibrator("own_cal:Nope")
    with pytest.raises(CalbenchError, match=r"own_cal has no 'hot' \(did you mean 'Hot'\?\)"):
        make_calibrator("own_cal:hot")
    with pytest.raises(CalbenchError, match=r"Run calbench from the folder that holds nomod.py"):
        make_calibrator("nomod:Hot")


RUN_INPUTS = {"criterion", "device", "true_map", "warm_start"}


@pytest.mark.parametrize("name", CONTRACT_NAMES)
def test_run_inputs_are_declared_and_are_parameters(name):
    calibrator = make_calibrator(name)
    params = set(calibrator.get_params(deep=False))
    assert set(calibrator.run_inputs) <= params & RUN_INPUTS  # each one a real parameter
    assert params & RUN_INPUTS <= set(calibrator.run_inputs)  # none taken by its name alone


def test_a_composition_hands_run_inputs_to_its_steps():
    chain = make_calibrator("compose", first="ts", second="dec")
    assert chain.run_input_keys("criterion") == ["first__criterion"]
    assert chain.run_input_keys("device") == ["first__device", "second__device"]
    assert chain.run_input_keys("warm_start") == ["first__warm_start"]


@pytest.mark.parametrize(
    "cls",
    sorted({c for c, _ in CALIBRATORS.values()} | {imported_calibrator(OWN_CALIBRATOR)}, key=str),
)
def test_every_calibrator_documents_its_parameters(cls):
    """Numpydoc: a Parameters section naming every constructor argument ("None" where
    there are none)."""
    import inspect
    import re

    doc = inspect.getdoc(cls) or ""
    assert "Parameters\n----------" in doc, cls.__name__
    section = doc.split("Parameters\n----------")[1]
    names = [
        p.name
        for p in inspect.signature(cls.__init__).parameters.values()
        if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    for name in names:
        listed = rf"^(\w+, )*{name}(, \w+)*( : .+)?$"  # numpydoc's "a, b : float" too
        assert re.search(listed, section, re.MULTILINE), (cls.__name__, name)
    if not names:
        assert section.strip().startswith("None"), cls.__name__


@pytest.mark.parametrize("name", CONTRACT_NAMES)
def test_every_string_option_is_declared_with_the_class(name):
    """A calibrator's string options are declared as constraints (checked once, by the
    base class, before any fit), not checked by hand inside ``_fit``. Not options: the
    criterion (a name or a spec, `calbench.criteria`'s) and the device (torch's)."""
    from calbench.calibrators.constraints import CONSTRAINTS

    calibrator = make_calibrator(name)
    table = {**CONSTRAINTS, **calibrator._parameter_constraints}
    strings = [
        p
        for p, v in calibrator.get_params(deep=False).items()
        if isinstance(v, str) and v != "auto" and p not in ("criterion", "device")
    ]
    assert [p for p in strings if p not in table] == []


def test_vector_scaling_beyond_newtons_class_limit_reaches_newtons_minimum(rng, monkeypatch):
    """Above `NEWTON_VECTOR_MAX_CLASSES` (1,000: at 5,000 classes the 2k x 2k Hessian takes
    800 MB) vector scaling fits by L-BFGS, to the minimum Newton's method finds."""
    import calbench.calibrators.scaling.temperature as scaling

    z, y = overconfident_logits(rng, 3000, 5, scale=1.5)
    newton = make_calibrator("vs", tol=1e-10).fit(z, y)
    monkeypatch.setattr(scaling, "NEWTON_VECTOR_MAX_CLASSES", 4)
    lbfgs = make_calibrator("vs", tol=1e-10).fit(z, y)
    assert lbfgs.n_iter_ != newton.n_iter_  # another solver ran
    np.testing.assert_allclose(lbfgs.coef_, newton.coef_, atol=1e-4)
    np.testing.assert_allclose(lbfgs.predict_proba(z), newton.predict_proba(z), atol=1e-5)


@pytest.mark.parametrize("name", ["dir", "ms_odir", "dir_odir", "dir_l2"])
def test_a_full_matrix_map_beyond_its_class_limit_refuses_before_work(name, monkeypatch):
    """At 5,000 classes a k x k map has 25M parameters (200 MB a copy) and a step costs
    n k^2, over the grid's many fits: refused with the maps that scale named, before any
    fitting. The workspace named is scipy's L-BFGS-B's, 2 m + 5 copies."""
    from calbench.calibrators.scaling import temperature as scaling
    from calbench.calibrators.solvers import memory

    k = memory.MATRIX_MAX_CLASSES + 1

    def no_fitting(*args, **kwargs):
        raise AssertionError("a fit began before the refusal")

    monkeypatch.setattr(scaling.TemperatureScaling, "fit", no_fitting)
    z = np.zeros((k, k))  # one row per class: the refusal needs no more
    workspace = (2 * 20 + 5) * k * (k + 1) * 8 / 1e9
    with pytest.raises(
        CalbenchError,
        match=rf"full {k} x {k} map .* {workspace:.0f} GB for L-BFGS-B's .* svs, vs, ets or ts",
    ):
        make_calibrator(name).fit(z, np.arange(k))


def test_sms_is_bounded_by_the_memory_its_fit_needs_not_by_the_class_limit(rng, monkeypatch):
    """SMS's fixed strengths need one fit of a few steps (5,000 classes x 25,000 rows: 3
    steps, 166 s, 12.6 GB on 2 cores), so it is not held to the ODIR maps' class limit;
    where scipy's fit would not fit in the memory available the lean path is taken, and
    where that would not either SMS is refused before any work (at 10,000 classes scipy
    asked for 33.5 GiB after 153 s and failed), naming the sizes."""
    from calbench.calibrators.matrix import sms_memory, structured
    from calbench.calibrators.scaling import temperature as scaling
    from calbench.calibrators.solvers import memory

    n, k = 400, 40  # past Newton's 36 classes: the L-BFGS fit, as at 10,000
    z, y = overconfident_logits(rng, n, k, scale=1.5)
    monkeypatch.setattr(memory, "MATRIX_MAX_CLASSES", 38)
    with pytest.raises(CalbenchError, match="fitted up to 38 classes"):
        make_calibrator("ms_odir").fit(z, y)
    fitted = make_calibrator("sms").fit(z, y)
    assert fitted.coef_.shape == (k, k)

    need = (45 + 10) * 8 * k * (k + 1) + 6 * 8 * n * k
    full, lean = sms_memory.sms_memory_needs(n, k)
    assert full == need
    # Where scipy's path would not fit and the lean one does, the lean one is taken ...
    monkeypatch.setattr(sms_memory, "available_memory", lambda: need - 1)
    monkeypatch.setattr(
        structured.StructuredScaling,
        "_fit_matrix_by_scaledlbfgs",
        lambda *a: pytest.fail("scipy's path where it does not fit"),
    )
    assert make_calibrator("sms").fit(z, y).coef_.shape == (k, k)
    # ... and where neither fits, SMS is refused before any work, naming both needs.
    monkeypatch.setattr(sms_memory, "available_memory", lambda: lean - 1)
    monkeypatch.setattr(
        scaling.TemperatureScaling, "fit", lambda *a: pytest.fail("a fit began before the refusal")
    )
    with pytest.raises(
        CalbenchError,
        match=rf"needs about {need / 1e9:.0f} GB .* lean path .* about {lean / 1e9:.0f} GB"
        r".* has 0 GB available.* svs",
    ):
        make_calibrator("sms").fit(z, y)
    with pytest.raises(CalbenchError, match="needs about"):
        make_calibrator("sms", lean="never").fit(z, y)  # (scipy's path or nothing)
    monkeypatch.setattr(sms_memory, "available_memory", lambda: None)
    sms_memory.check_sms_memory(n, 10**5)  # memory unknown (no /proc, no sysconf): fitted
