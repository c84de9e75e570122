"""The preconditioned L-BFGS of the full-matrix maps beyond Newton's class limit reaches the
minimum a long plain optimisation of the same objective reaches, in far fewer steps."""

import warnings
from contextlib import contextmanager

import numpy as np
import pytest

from calbench.calibrators import make_calibrator
from calbench.calibrators.solvers.newton_vector import vector_label_sums, vector_log_loss
from calbench.calibrators.solvers.preconditioned import fit_multinomial
from calbench.calibrators.solvers.preconditioners import (
    BlockPreconditioner,
    ClassPairPreconditioner,
    RowPreconditioner,
)
from calbench.simplex import log_softmax, softmax


def _probability_data(rng, n=1500, k=40):
    """Data published as float32 probabilities, as netcal's records: ln p down to -80."""
    z = rng.normal(size=(n, k)) * 6
    y = (rng.random((n, 1)) > softmax(z / 1.5).cumsum(axis=1)).sum(axis=1)
    probs = softmax(z).astype(np.float32).astype(np.float64)
    return np.log(np.clip(probs, 1e-35, None)), y


@contextmanager
def _any_warnings():
    """Plain L-BFGS may stop at max_iter (its warning is the point of the comparison)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _objective(a, x, y, ridge):
    logits = np.hstack([x, np.ones((len(x), 1))]) @ a.T
    return -log_softmax(logits)[np.arange(len(y)), y].mean() + (ridge * a**2).sum()


@pytest.mark.parametrize("method, lam, mu", [("ms_odir", 1000.0, 1000.0), ("dir_odir", 1.0, 0.1)])
def test_the_preconditioned_fit_is_as_low_as_a_long_plain_fit(rng, method, lam, mu):
    x, y = _probability_data(rng)
    fast = make_calibrator(method, reg_lambda=lam, reg_mu=mu).fit(x, y)
    slow = make_calibrator(
        method, reg_lambda=lam, reg_mu=mu, solver="lbfgs", tol=1e-12, max_iter=20000
    ).fit(x, y)
    plain = make_calibrator(method, reg_lambda=lam, reg_mu=mu, solver="lbfgs")
    with _any_warnings():
        plain.fit(x, y)
    # The long run's objective to 1e-8 relative (its own last steps move the 8th digit),
    # and never above plain L-BFGS at the same tolerance.
    assert fast.loss_ <= slow.loss_ * (1 + 1e-8)
    assert fast.loss_ <= plain.loss_
    assert fast.n_iter_ < min(slow.n_iter_, plain.n_iter_)
    assert fast.gradient_max_ < 1e-5
    np.testing.assert_allclose(fast.predict_proba(x), slow.predict_proba(x), atol=2e-4)


def test_fit_multinomial_minimises_the_written_out_objective(rng):
    """Against the objective written out in numpy: the fit's value is the objective at its
    weights, and no small step from them lowers it."""
    x, y = _probability_data(rng, n=600, k=12)
    k = x.shape[1]
    ridge = np.full((k, k + 1), 0.05)
    a0 = np.hstack([np.eye(k), np.zeros((k, 1))])
    fit = fit_multinomial(x, y, a0, ridge, tol=1e-10)
    assert fit.loss == pytest.approx(_objective(fit.weights, x, y, ridge), rel=1e-12)
    for _ in range(5):
        step = rng.normal(size=a0.shape) * 1e-4
        assert _objective(fit.weights + step, x, y, ridge) >= fit.loss - 1e-12


def test_a_round_of_lbfgs_evaluates_no_point_twice(rng, monkeypatch):
    """The round's start is evaluated for its preconditioner and scipy's last point by
    scipy, so neither is evaluated again (at 2,000 classes an evaluation is the fit's
    whole cost: SMS 9 evaluations before, 7 after). The fit still reports the objective
    and the gradient at the weights it returns. (A fit of several rounds evaluates each
    later round's start again, for the probabilities its preconditioner is built from.)"""
    from calbench.calibrators.solvers import preconditioned

    points, builds = [], []
    make_objective = preconditioned._objective

    def recording(*args):
        in_weights = make_objective(*args)

        def evaluate(a, for_preconditioner=False):
            points.append(np.array(a, copy=True))
            builds.append(for_preconditioner)
            return in_weights(a, for_preconditioner)

        return evaluate

    monkeypatch.setattr(preconditioned, "_objective", recording)
    x, y = _probability_data(rng, n=600, k=12)
    k = x.shape[1]
    ridge = np.full((k, k + 1), 0.05)
    fit = fit_multinomial(x, y, np.hstack([np.eye(k), np.zeros((k, 1))]), ridge, tol=1e-6)
    assert fit.converged and builds == [True] + [False] * (len(points) - 1)  # one round
    assert len(points) > 10
    for i, later in enumerate(points):
        for earlier in points[:i]:
            assert not np.allclose(later, earlier, rtol=1e-12, atol=0), f"point {i} again"
    assert fit.loss == pytest.approx(_objective(fit.weights, x, y, ridge), rel=1e-12)
    features = np.hstack([x, np.ones((len(x), 1))])
    residual = softmax(features @ fit.weights.T) - np.eye(k)[y]
    gradient = residual.T @ features / len(y) + 2 * ridge * fit.weights
    assert fit.gradient_max == pytest.approx(np.abs(gradient).max(), rel=1e-6)
    assert fit.gradient_max <= 1e-6


def test_the_preconditioner_maps_are_inverse_and_its_gradient_the_chain_rule(rng):
    x, _ = _probability_data(rng, n=300, k=6)
    xt = np.hstack([x, np.ones((300, 1))])
    coordinates = RowPreconditioner(xt, softmax(x), np.full((6, 7), 0.1))
    a = rng.normal(size=(6, 7))
    np.testing.assert_allclose(coordinates.weights(coordinates.theta(a)), a, rtol=1e-10)
    # f(theta) = <g, weights(theta)> has gradient L^-1 g: the chain rule of `gradient`.
    g, theta = rng.normal(size=(6, 7)), coordinates.theta(a)
    h = 1e-6
    direction = rng.normal(size=(6, 7))
    numeric = (
        (g * coordinates.weights(theta + h * direction)).sum()
        - (g * coordinates.weights(theta - h * direction)).sum()
    ) / (2 * h)
    assert (coordinates.gradient(g) * direction).sum() == pytest.approx(numeric, rel=1e-7)


def test_the_strict_row_test_bounds_the_weights_gradient(rng):
    """`RowPreconditioner.strict`: a gradient in its coordinates of at most ``share`` in
    every entry is one in the weights of at most 1 (``grad_a = L grad_theta``), the bound
    tight within a factor of a few for the worst sign pattern."""
    x, _ = _probability_data(rng, n=300, k=6)
    xt = np.hstack([x, np.ones((300, 1))])
    rows = RowPreconditioner(xt, softmax(x), np.full((6, 7), 0.1))
    strict = rows.strict()
    assert rows.gradient_share == 1.0 and strict.gradient_share < 1.0
    share = strict.gradient_share
    # L, column by column: grad_a = L grad_theta, so L e_j is theta's unit gradient mapped.
    basis = np.eye(42).reshape(42, 6, 7)
    mapped = np.array([_to_weights_gradient(strict, e) for e in basis]).reshape(42, 42).T
    worst = np.abs(mapped).sum(axis=1).max()  # the largest entry over grad_theta in [-1, 1]
    assert worst * share <= 1.0 + 1e-12
    assert worst * share >= 0.2


def _to_weights_gradient(coordinates, grad_theta):
    """``L grad_theta``: the inverse of `gradient` (``L^-1 grad_a``), by solving for it."""
    flat = grad_theta.ravel()
    columns = np.array(
        [
            coordinates.gradient(e).ravel()
            for e in np.eye(flat.size).reshape((flat.size,) + grad_theta.shape)
        ]
    ).T
    return np.linalg.solve(columns, flat).reshape(grad_theta.shape)


def test_a_round_that_stopped_short_of_tol_goes_on_without_exact_blocks(monkeypatch):
    """SMS at 100 classes (netcal-like float32 probabilities): the first round stops on
    its own gradient test with the weights' above tol and no round runs out of steps, so
    the rounds that go on use the rows' strict test and build no `BlockPreconditioner`
    (two such builds for two steps were 70% of the fit); the fit still meets tol."""
    from calbench.calibrators.solvers import preconditioners

    built = []
    plain = preconditioners.BlockPreconditioner.__init__

    def counted(self, *args):
        built.append(1)
        plain(self, *args)

    monkeypatch.setattr(preconditioners.BlockPreconditioner, "__init__", counted)
    x, y = _probability_data(np.random.default_rng(3), n=2000, k=60)
    model = make_calibrator("sms").fit(x, y)
    assert built == []
    assert model.gradient_max_ <= model.tol


def test_the_block_preconditioner_whitens_each_rows_block_exactly(rng):
    """`BlockPreconditioner`: inverse maps, the chain rule, and in its coordinates each
    class row's Hessian block (plus the ridge) is the identity, which the rank-one model
    only approximates."""
    x, _ = _probability_data(rng, n=300, k=6)
    xt = np.hstack([x, np.ones((300, 1))])
    probs, curvature = softmax(x), np.full((6, 7), 0.1)
    coordinates = BlockPreconditioner(xt, probs, curvature)
    a = rng.normal(size=(6, 7))
    np.testing.assert_allclose(coordinates.weights(coordinates.theta(a)), a, rtol=1e-10)
    g, direction = rng.normal(size=(6, 7)), rng.normal(size=(6, 7))
    np.testing.assert_allclose(  # <L^-1 g, d> = <g, L^-T d>
        (coordinates.gradient(g) * direction).sum(), (g * coordinates.weights(direction)).sum()
    )
    w = probs * (1 - probs)
    for c in range(6):
        block = (xt * w[:, c : c + 1]).T @ xt / 300 + np.diag(curvature[c])
        # columns L_c^-T e_j, as weights of row c alone
        basis = np.zeros((7, 6, 7))
        basis[np.arange(7), c, np.arange(7)] = 1.0
        columns = np.array([coordinates.weights(e)[c] for e in basis]).T
        np.testing.assert_allclose(columns.T @ block @ columns, np.eye(7), atol=1e-8)
    rows = RowPreconditioner(xt, probs, curvature)
    columns = np.array([rows.weights(e)[0] for e in np.eye(42).reshape(42, 6, 7)[:7]]).T
    block = (xt * w[:, :1]).T @ xt / 300 + np.diag(curvature[0])
    assert np.abs(columns.T @ block @ columns - np.eye(7)).max() > 1e-3


@pytest.mark.parametrize("method", ["ms_odir", "dir_odir"])
@pytest.mark.parametrize("lam, mu", [(1000.0, 1000.0), (1000.0, 0.01)])
def test_odir_converges_at_100_classes_on_a_real_network(more_networks, method, lam, mu):
    """netcal's DenseNet-BC-100 CIFAR-100 (float32 probabilities, ln p down to -80), the
    case plain L-BFGS crawled through (1,503 steps at lambda = mu = 1000), at the grid
    points inner CV chooses there: the fit stops with every gradient entry of its objective
    below 1e-5, in a few hundred steps."""
    from tests.conftest import load_network

    data = load_network("c100_densenet_bc100_netcal", more_networks)
    fit = make_calibrator(method, reg_lambda=lam, reg_mu=mu).fit(data.logits_cal, data.y_cal)
    assert fit.gradient_max_ < 1e-5
    assert fit.n_iter_ < 1000


@pytest.mark.slow
def test_odir_at_100_classes_reaches_a_long_reference_run(more_networks):
    """Against plain L-BFGS run to tol 1e-12 (3,370 steps, about 30 s): the same objective to
    1e-9 relative."""
    from tests.conftest import load_network

    data = load_network("c100_densenet_bc100_netcal", more_networks)
    z, y = data.logits_cal, data.y_cal
    fast = make_calibrator("ms_odir", reg_lambda=1000.0, reg_mu=1000.0).fit(z, y)
    slow = make_calibrator(
        "ms_odir", reg_lambda=1000.0, reg_mu=1000.0, solver="lbfgs", tol=1e-12, max_iter=30000
    ).fit(z, y)
    assert fast.loss_ <= slow.loss_ * (1 + 1e-9)


@pytest.mark.slow  # 11 s each on netcal's LeNet-5 CIFAR-100; the fits above keep the quick check
@pytest.mark.parametrize("method", ["ms_odir", "dir_odir"])
def test_odir_converges_at_a_weak_penalty_on_lenet5(more_networks, method):
    """netcal's LeNet-5 CIFAR-100 at lambda = mu = 0.01, where the rank-one preconditioner
    alone stopped at its 2,000-step limit (largest gradient entry 3e-5, objective 1.5e-5
    above the minimum): with the exact row blocks from the second round it converges, to
    within 2e-7 of a tol = 1e-8 run's objective (2.6073630730, 3,117 steps)."""
    from tests.conftest import load_network

    data = load_network("c100_lenet5_netcal", more_networks)
    fit = make_calibrator(method, reg_lambda=0.01, reg_mu=0.01).fit(data.logits_cal, data.y_cal)
    assert fit.gradient_max_ <= 1e-6
    assert fit.n_iter_ < 1500
    assert fit.loss_ - 2.6073630730 < 2e-7


def test_the_class_pair_preconditioner_whitens_each_class_pair_exactly(rng):
    """`ClassPairPreconditioner` from `vector_log_loss`'s sums: inverse maps, the chain rule,
    and in its coordinates each class's 2 x 2 block of vector scaling's Hessian, ``(1/n)
    sum_i p_ic (1 - p_ic) [x_ic, 1]^T [x_ic, 1]``, written out here, is the identity."""
    x = rng.normal(size=(400, 7)) * 3
    y = rng.integers(0, 7, 400)
    w, b = np.full(7, 0.8), np.full(7, 0.1)
    sums = vector_log_loss(w, b, x, y, vector_label_sums(x, y), curvature=True)[3]
    coordinates = ClassPairPreconditioner(sums)
    a = rng.normal(size=(2, 7))
    np.testing.assert_allclose(coordinates.weights(coordinates.theta(a)), a, rtol=1e-10)
    g, direction = rng.normal(size=(2, 7)), rng.normal(size=(2, 7))
    np.testing.assert_allclose(
        (coordinates.gradient(g) * direction).sum(), (g * coordinates.weights(direction)).sum()
    )
    probs = softmax(x * w + b)
    for c in range(7):
        features = np.stack([x[:, c], np.ones(400)], axis=1)
        block = (features * (probs[:, c] * (1 - probs[:, c]))[:, None]).T @ features / 400
        basis = np.zeros((2, 2, 7))
        basis[[0, 1], [0, 1], c] = 1.0
        columns = np.array([coordinates.weights(e)[:, c] for e in basis]).T
        np.testing.assert_allclose(columns.T @ block @ columns, np.eye(2), atol=1e-8)


@pytest.mark.parametrize("k", [300, 2**18 // 40])  # one row a chunk; 40 rows a chunk
def test_vector_scalings_chunked_log_loss_is_the_chain_rule(rng, k, monkeypatch):
    """`vector_log_loss` (rows in chunks, on every core) against the log-loss and its
    gradients written out on whole arrays, and the same bits on one core as on two."""
    import calbench.calibrators.solvers.newton_vector_lean as newton

    n = 500
    x = rng.normal(size=(n, k)) * 4
    y = rng.integers(0, k, n)
    w, b = 1 + 0.1 * rng.normal(size=k), rng.normal(size=k)
    value, grad_w, grad_b, _ = vector_log_loss(w, b, x, y, vector_label_sums(x, y))
    logp = log_softmax(x * w + b)
    residual = np.exp(logp)
    residual[np.arange(n), y] -= 1.0
    assert value == pytest.approx(-logp[np.arange(n), y].mean(), rel=1e-13)
    np.testing.assert_allclose(grad_w, (residual * x).mean(axis=0), atol=1e-15)
    np.testing.assert_allclose(grad_b, residual.mean(axis=0), atol=1e-15)
    for workers in (1, 2):
        monkeypatch.setattr(newton, "cores", lambda workers=workers: workers)
        again = vector_log_loss(w, b, x, y, vector_label_sums(x, y))
        assert again[0] == value
        assert np.array_equal(again[1], grad_w) and np.array_equal(again[2], grad_b)


def test_vector_scaling_by_preconditioned_lbfgs_meets_newtons_minimum(rng, monkeypatch):
    """Beyond Newton's class limit (here lowered to 10) vector scaling fits by L-BFGS in
    `ClassPairPreconditioner`'s coordinates: Newton's minimum, every gradient entry below
    tol, in fewer steps than L-BFGS in the scales and intercepts themselves."""
    import calbench.calibrators.scaling.temperature as scaling

    k = 60
    y = np.concatenate([np.arange(k).repeat(10), rng.integers(0, k, 2400)])
    z = rng.normal(size=(len(y), k))
    z[np.arange(len(y)), y] += 2.0
    z = z * 3 + rng.normal(scale=2, size=k)  # per-class offsets: intercepts matter
    newton = make_calibrator("vs", tol=1e-10).fit(z, y)
    monkeypatch.setattr(scaling, "NEWTON_VECTOR_MAX_CLASSES", 10)
    blocks = make_calibrator("vs").fit(z, y)
    plain = make_calibrator("vs", preconditioner="none").fit(z, y)
    assert blocks.gradient_max_ <= 1e-6
    assert blocks.loss_ == pytest.approx(newton.loss_, rel=1e-10)
    assert blocks.loss_ <= plain.loss_
    assert blocks.n_iter_ < plain.n_iter_
    np.testing.assert_allclose(blocks.predict_proba(z), newton.predict_proba(z), atol=1e-5)


@pytest.mark.parametrize("name", ["vs", "bcts", "dir", "dir_l2"])
def test_a_class_without_a_fitting_label_is_named_before_the_fit(name):
    """A map with a free intercept per class has no log-loss minimum where a class has no
    fitting label (its intercept's gradient, the mean of its probabilities, is positive
    everywhere): one warning names how many, before any work; none where all are there."""
    from sklearn.exceptions import ConvergenceWarning

    rng = np.random.default_rng(3)
    z = rng.normal(size=(300, 6)) * 2
    y = rng.integers(0, 5, 300)  # class 5 never a label
    with pytest.warns(ConvergenceWarning, match=r"1 of 6 classes have no label among the 300"):
        make_calibrator(name).fit(z, y)
    y[:6] = np.arange(6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_calibrator(name).fit(z, y)


def test_a_penalised_intercept_has_a_minimum_without_its_label():
    """ODIR penalises the intercepts (mu): a class without a label then has a finite
    minimum, and no warning is given."""
    rng = np.random.default_rng(3)
    z, y = rng.normal(size=(300, 6)) * 2, rng.integers(0, 5, 300)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_calibrator("dir_odir", reg_lambda=0.1, reg_mu=0.1).fit(z, y)


def test_sms_fits_in_one_round_to_the_minimum_of_a_tight_reference(monkeypatch):
    """SMS at 60 classes (float32 probabilities, as netcal's): the round goes on until both
    the preconditioned coordinates' test and the weights' own are met, so one
    preconditioner is built and no point is evaluated twice, and the map is the
    minimum of the written-out objective that scipy reaches at a gradient of 1e-13."""
    from scipy.optimize import minimize

    from calbench.calibrators.solvers import preconditioned, preconditioners

    built, points = [], []
    plain = preconditioners.RowPreconditioner.__init__
    monkeypatch.setattr(
        preconditioners.RowPreconditioner,
        "__init__",
        lambda self, *args: built.append(1) or plain(self, *args),
    )
    make_objective = preconditioned._objective

    def recording(*args):
        in_weights = make_objective(*args)
        return lambda a, **kw: points.append(a.copy()) or in_weights(a, **kw)

    monkeypatch.setattr(preconditioned, "_objective", recording)
    x, y = _probability_data(np.random.default_rng(3), n=2000, k=60)
    model = make_calibrator("sms").fit(x, y)
    assert built == [1] and model.gradient_max_ <= model.tol
    assert all(not np.array_equal(p, q) for i, p in enumerate(points) for q in points[:i])
    k, features = x.shape[1], model._fitting_features(x)
    ridge = model._penalty_matrix(k)
    ones = np.hstack([features, np.ones((len(y), 1))])

    def objective(theta):
        a = theta.reshape(k, k + 1)
        logits = features + ones @ a.T
        residual = softmax(logits) - np.eye(k)[y]
        value = -log_softmax(logits)[np.arange(len(y)), y].mean() + (ridge * a**2).sum()
        return value, (residual.T @ ones / len(y) + 2 * ridge * a).ravel()

    start = np.hstack([model.coef_ - np.eye(k), model.intercept_[:, None]]).ravel()
    tight = {"gtol": 1e-13, "ftol": 0}
    ref = minimize(objective, start, jac=True, method="L-BFGS-B", options=tight)
    a = ref.x.reshape(k, k + 1)
    np.testing.assert_allclose(model.coef_, a[:, :k] + np.eye(k), rtol=0, atol=2e-8)
    np.testing.assert_allclose(model.intercept_, a[:, k], rtol=0, atol=2e-8)


def test_narrow_row_sums_are_the_float64_sums_to_float32_rounding(monkeypatch):
    """From `NARROW_ENTRIES` probabilities the rows' blocks are summed in float32: each
    sum is the float64 one written out here to float32's rounding, and the coordinates
    built on them map a point back to itself as the float64 ones do."""
    import calbench.calibrators.solvers.preconditioners as preconditioners

    rng = np.random.default_rng(4)
    x, _ = _probability_data(rng, n=600, k=30)
    xt = np.hstack([x, np.ones((len(x), 1))])
    probs = softmax(rng.normal(size=x.shape) * 2)
    weight = probs * (1 - probs)
    expected = (weight.T @ xt**2 / len(x), weight.T @ xt / len(x), weight.mean(axis=0)[:, None])
    for got, want in zip(preconditioners._narrow_sums(xt, probs), expected, strict=True):
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=2e-6)
    curvature = np.full(xt.shape[1], 0.05)
    wide = RowPreconditioner(xt, probs.copy(), curvature)
    monkeypatch.setattr(preconditioners, "NARROW_ENTRIES", 1)
    narrow = RowPreconditioner(xt, probs.copy(), curvature)
    np.testing.assert_allclose(narrow.root, wide.root, rtol=1e-5)
    np.testing.assert_allclose(narrow.gamma, wide.gamma, rtol=1e-5)
    np.testing.assert_allclose(narrow.unit, wide.unit, rtol=1e-4, atol=1e-8)
    # float32 features (a float32 fit's own array) keep their numbers: no squaring in place
    features = xt.astype(np.float32)
    before = features.copy()
    RowPreconditioner(features, probs.copy(), curvature)
    np.testing.assert_array_equal(features, before)
