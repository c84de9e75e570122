"""CalArena's methods against the code CalArena runs (probmetrics 1.3 and the packages it
calls), its log-loss against probmetrics', and the transcription of its published rows
against the source files (rebuilt byte for byte from the transcription)."""

from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from scipy.special import log_softmax as sp_log_softmax

from calbench.calibrators import make_calibrator
from calbench.calibrators.optional import optional_module
from calbench.data.dataset import Dataset
from calbench.errors import CalbenchError
from calbench.metrics.scoring import log_loss
from calbench.papers.calarena2026.published_results import (
    METHODS,
    published_rows,
    rebuild_source,
    sources,
)
from calbench.papers.calarena2026.stored_inputs import float32_probabilities
from calbench.simplex import float32_softmax, probs_to_logits

pc = pytest.importorskip("probmetrics.calibrators")


@pytest.fixture(scope="module")
def stored():
    """A seeded 4-class task as CalArena stores one: float32 probabilities (many tiny ones,
    ties at the bottom) and calbench's logits of them."""
    rng = np.random.default_rng(7)
    y = rng.integers(0, 4, 1000)
    logits = rng.normal(0, 2, (1000, 4)).astype(np.float32)
    logits[np.arange(1000), y] += 6 * (rng.random(1000) < 0.8)
    logits *= 3  # overconfident: float32 underflows some probabilities to tiny values
    p = float32_softmax(logits)
    return p[:600], y[:600], p[600:], y[600:]


def _ours(name, p_cal, y_cal, p_test):
    return (
        make_calibrator(name)
        .fit(probs_to_logits(p_cal), y_cal)
        .predict_proba(probs_to_logits(p_test))
    )


REFERENCES = {
    "histbin_uniform_prior": (
        lambda: pc.MulticlassOneVsRestCalibrator(
            pc.BinaryHistogramBinningCalibrator(strategy="uniform")
        ),
        1e-12,
    ),
    "histbin_quantile_prior": (
        lambda: pc.MulticlassOneVsRestCalibrator(
            pc.BinaryHistogramBinningCalibrator(strategy="quantile")
        ),
        1e-12,
    ),
    "cir": (
        lambda: pc.MulticlassOneVsRestCalibrator(pc.CenteredIsotonicRegressionCalibrator()),
        1e-12,
    ),
    "isotonic_calarena": (lambda: pc.SklearnCalibrator(method="isotonic", cv="prefit"), 1e-6),
    "kernel_nw": (lambda: pc.KernelCalibrator(), 1e-5),  # probmetrics computes in float32
    "xgboost": (lambda: pc.XGBoostCalibrator(), 1e-5),
    "lightgbm": (lambda: pc.LightGBMCalibrator(), 1e-9),
    "catboost": (lambda: pc.CatBoostCalibrator(), 1e-9),
    "spline_lucena": (lambda: pc.MLISplineCalibrator(), 1e-9),
    "bbq": (lambda: pc.NetcalBBQCalibrator(), 1e-9),
    # CalArena's binary methods on a 4-class task: one per class against the rest
    "cdf_spline_calarena": (
        lambda: pc.MulticlassOneVsRestCalibrator(pc.CDFSplineCalibrator()),
        1e-9,
    ),
    "enir": (lambda: pc.MulticlassOneVsRestCalibrator(pc.NetcalENIRCalibrator()), 1e-6),
    # float32 torchmin runs, replayed on the same float32 inputs
    "ms_calarena": (lambda: pc.MatrixScalingCalibrator(), 1e-5),
    "sms_calarena": (lambda: pc.SMSCalibrator(), 1e-5),
    "venn_abers_calarena": (lambda: pc.VennAbersCalibrator(), 1e-9),
}


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_calarena_method_equals_its_reference(stored, name):
    p_cal, y_cal, p_test, _ = stored
    factory, atol = REFERENCES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = np.asarray(factory().fit(p_cal, y_cal).predict_proba(p_test), float)
    np.testing.assert_allclose(_ours(name, p_cal, y_cal, p_test), expected, atol=atol, rtol=0)


def test_isotonic_calarena_is_not_isotonic_plain_on_ties(stored):
    """The float32 fit pools scores within 1e-6 (scikit-learn's _make_unique): the variant
    differs from Kull's and Valk's float64 fit on the same task."""
    p_cal, y_cal, p_test, _ = stored
    a = _ours("isotonic_calarena", p_cal, y_cal, p_test)
    b = _ours("isotonic_plain", p_cal, y_cal, p_test)
    assert np.abs(a - b).max() > 1e-3


def test_vs_logp_minimises_vector_scaling_of_log_probabilities(stored):
    """The definition written out: softmax(w * ln p + b), the mean log-loss minimised by
    scipy's BFGS from w = 1, b = 0."""
    p_cal, y_cal, p_test, _ = stored
    x = np.log(p_cal.astype(np.float64))
    k = x.shape[1]

    def nll(theta):
        z = x * theta[:k] + theta[k:]
        return -sp_log_softmax(z, axis=1)[np.arange(len(y_cal)), y_cal].mean()

    theta = minimize(nll, np.r_[np.ones(k), np.zeros(k)], method="BFGS", tol=1e-10).x
    expected = np.exp(
        sp_log_softmax(np.log(p_test.astype(np.float64)) * theta[:k] + theta[k:], axis=1)
    )
    np.testing.assert_allclose(_ours("vs_logp", p_cal, y_cal, p_test), expected, atol=1e-5)


def test_dir_odir_calarena_minimises_dirichletcals_summed_odir(stored):
    """dirichletcal's FullDirichletCalibrator(reg_lambda=1e-3, reg_mu=1e-3) objective written
    out: last row of [W | b] fixed at zero, 1e-3 * (sum of squared off-diagonal weights +
    sum of squared intercepts) added to the mean log-loss, not divided by k(k-1) or k."""
    p_cal, y_cal, p_test, _ = stored
    x = np.log(p_cal.astype(np.float64))
    k = x.shape[1]
    off = ~np.eye(k, dtype=bool)

    def full(theta):
        return np.vstack([theta.reshape(k - 1, k + 1), np.zeros(k + 1)])

    def objective(theta):
        a = full(theta)
        z = x @ a[:, :k].T + a[:, k]
        nll = -sp_log_softmax(z, axis=1)[np.arange(len(y_cal)), y_cal].mean()
        return nll + 1e-3 * (a[:, :k][off] ** 2).sum() + 1e-3 * (a[:, k] ** 2).sum()

    start = np.hstack([np.eye(k), np.zeros((k, 1))])
    start = (start - start[-1])[:-1].ravel()
    a = full(
        minimize(
            objective,
            start,
            method="L-BFGS-B",
            options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 10000},
        ).x
    )
    xt = np.log(p_test.astype(np.float64))
    expected = np.exp(sp_log_softmax(xt @ a[:, :k].T + a[:, k], axis=1))
    np.testing.assert_allclose(
        _ours("dir_odir_calarena", p_cal, y_cal, p_test), expected, atol=1e-5
    )


def test_float32_log_loss_equals_probmetrics():
    from probmetrics.metrics import Metrics

    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.full(5, 0.3), 300).astype(np.float32)
    p[:20, 0] = 0.0  # zeros cost ln(float32 tiny), not ln(float64 tiny)
    p /= p.sum(axis=1, keepdims=True)
    y = np.zeros(300, dtype=int)
    y[20:] = rng.integers(0, 5, 280)
    expected = (
        Metrics.from_names(["logloss"])
        .compute_all_from_labels_probs(torch.tensor(y), torch.tensor(p))["logloss"]
        .item()
    )
    assert log_loss(p.astype(np.float64), y, floor="float32") == pytest.approx(expected, rel=1e-6)
    assert log_loss(p.astype(np.float64), y) > expected + 10  # calbench's default floor: 708


def test_float32_probabilities_are_calarenas_stored_values():
    """CalArena's generate_cv_benchmarks.py: numpy's softmax of the float32 logits, float32."""
    rng = np.random.default_rng(0)
    z = (rng.normal(0, 10, (50, 3))).astype(np.float32)
    y = rng.integers(0, 3, 50)
    shifted = z - z.max(axis=1, keepdims=True)
    expected = (np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)).astype(np.float32)
    data = float32_probabilities(Dataset("t", z, y, z, y))
    assert np.array_equal(np.exp(data.logits_cal).astype(np.float32), expected)
    assert not data.is_logits


def test_a_missing_optional_package_gets_one_clear_error(monkeypatch):
    import importlib

    real = importlib.import_module

    def refuse(name, *args):
        if name == "xgboost":
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", refuse)
    with pytest.raises(CalbenchError, match=r"calbench\[calarena\]"):
        optional_module("xgboost")


def test_the_transcription_rebuilds_calarenas_files_byte_for_byte():
    """Every transcribed source file, rebuilt from calbench's rows, has the SHA-256 recorded
    when it was read from probkit/CalArena (commit a0afa15); 19 cv and 9 ImageNet multiclass
    methods, 20 cv binary ones."""
    rows = published_rows()
    files = sources()
    assert sum(name.startswith("cv-multiclass/") for name in files) == 19
    assert sum(name.startswith("imagenet-multiclass/") for name in files) == 9
    assert sum(name.startswith("cv-binary/") for name in files) == 20
    for name, source in files.items():
        benchmark, method = name.removesuffix(".csv").split("/")
        assert method in METHODS
        data = rebuild_source(rows, benchmark, method)
        assert data.count(b"\n") == source["rows"] + 1
        assert hashlib.sha256(data).hexdigest() == source["sha256"], name
    assert len(rows) == 4 * (19 * 20 + 9 * 8) + 5 * 20 * 13


def test_calarena_numbers_on_the_published_densenet40(published_logits, tmp_path):
    """On Kull et al.'s DenseNet-40 CIFAR-10 file, five of CalArena's methods run through the
    preset (float32 probabilities, its metrics) give its published numbers: equal or within
    the float32 tolerance notes.yaml states."""
    from calbench.reproduce.comparison import compare
    from tests.cli.test_cli import calbench

    methods = ["ts", "histbin_quantile_prior", "isotonic_calarena", "bbq", "ms_calarena"]
    done = calbench(
        "run",
        "-m",
        "experiment=calarena_cv",
        "dataset=c10_densenet40",
        f"method={','.join(methods)}",
        f"data_dir={published_logits}",
        f"results_dir={tmp_path}",
        "hydra/launcher=basic",
    )
    assert done.returncode == 0
    report = compare("calarena_cv", tmp_path)
    mine = report[(report["dataset"] == "c10_densenet40") & report["method"].isin(methods)]
    assert len(mine) == 20
    missed = mine[~mine["status"].isin(["equal", "within tolerance"])]
    columns = ["method", "metric", "published", "calbench", "delta", "status"]
    assert missed.empty, "numbers off CalArena's:\n" + missed[columns].to_string()
    bbq = mine[(mine["method"] == "bbq") & (mine["metric"] == "log_loss_float32")]
    assert bbq["status"].item() == "equal"


def test_boosting_on_classes_too_rare_for_its_folds_is_one_clear_error():
    """Five stratified folds need five rows of each class: scikit-learn's ValueError became
    calbench's error naming the rarest class's count and the fix."""
    pytest.importorskip("lightgbm")
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), [4, 12, 12, 12])  # class 0: 4 rows for 5 folds
    z = rng.normal(size=(len(y), 4))
    with pytest.raises(CalbenchError, match=r"rarest class here has 4 row\(s\)"):
        make_calibrator("lightgbm").fit(z, y)


def test_the_binary_task_is_calarenas_animals_against_machines(rng):
    """generate_cv_benchmarks.py: class 1 the animals (2-7), its probability the sigmoid of
    logsumexp(animals) - logsumexp(machines), stored as float32, class 0 its complement."""
    from scipy.special import logsumexp

    z = rng.normal(0, 4, (500, 10))
    z[:20, 3] += 40  # animals beyond doubt: class 1's float32 probability rounds to 1
    y = rng.integers(0, 10, 500)
    data = Dataset("c10", z, y, z, y).as_binary([2, 3, 4, 5, 6, 7], names=["machine", "animal"])
    b = logsumexp(z[:, 2:8], axis=1) - logsumexp(z[:, [0, 1, 8, 9]], axis=1)
    np.testing.assert_allclose(data.probs_test[:, 1], 1 / (1 + np.exp(-b)), rtol=1e-12)
    np.testing.assert_array_equal(data.y_test, (y >= 2) & (y <= 7))
    assert data.class_names == ["machine", "animal"]
    stored = float32_probabilities(data)
    p1 = (1 / (1 + np.exp(-b.astype(np.float32)))).astype(np.float32)
    np.testing.assert_allclose(stored.probs_test[:, 1], p1, rtol=1e-7)
    certain = p1 == 1
    # 1 - 1 = 0, as stored (read as ln p, so the float64 floor)
    assert certain.any() and (stored.probs_test[certain, 0] < 1e-300).all()
    with pytest.raises(CalbenchError, match="some but not all"):
        Dataset("c10", z, y, z, y).as_binary(range(10))


def test_a_binary_method_calibrates_class_1_alone_as_calarena(rng):
    """On two classes a one-vs-rest method fits class 1's map and class 0 is its complement:
    probmetrics' binary histogram binning gives the same predictions."""
    p1 = rng.uniform(0, 1, 2000).astype(np.float32)
    y = (rng.random(2000) < p1**1.5).astype(int)
    probs = np.column_stack([1 - p1, p1]).astype(np.float32)
    reference = pc.BinaryHistogramBinningCalibrator(strategy="quantile").fit(probs, y)
    expected = np.asarray(reference.predict_proba(probs), dtype=np.float64)
    model = make_calibrator("histbin_quantile_prior").fit(probs_to_logits(probs), y)
    assert len(model.maps_) == 1
    np.testing.assert_allclose(model.predict_proba(probs_to_logits(probs)), expected, atol=1e-7)


def test_calarena_binary_numbers_on_the_published_densenet40(published_logits, tmp_path):
    """The cv-binary preset on DenseNet-40's animals against machines: methods whose binary
    fit is CalArena's give its published Brier, log-loss and accuracy."""
    from calbench.reproduce.comparison import compare
    from tests.cli.test_cli import calbench

    methods = ["uncal", "ts", "histbin_quantile_prior"]
    done = calbench(
        "run",
        "-m",
        "experiment=calarena_cv_binary",
        "dataset=c10_densenet40",
        f"method={','.join(methods)}",
        f"data_dir={published_logits}",
        f"results_dir={tmp_path}",
        "hydra/launcher=basic",
    )
    assert done.returncode == 0, done.stderr
    report = compare("calarena_cv_binary", tmp_path)
    mine = report[
        (report["dataset"] == "c10_densenet40")
        & report["method"].isin(methods)
        & report["metric"].isin(["brier", "log_loss_float32", "accuracy"])
    ]
    assert len(mine) == 9
    missed = mine[~mine["status"].isin(["equal", "within tolerance"])]
    columns = ["method", "metric", "published", "calbench", "status"]
    assert missed.empty, "numbers off CalArena's:\n" + missed[columns].to_string()


def test_a_binary_cir_prices_a_certain_miss_as_calarena(rng):
    """On two classes CalArena runs probmetrics' CIR unclipped: a run of one label predicts
    exactly 0 or 1, which its float32 log-loss floors at ln(float32 tiny). calbench floors
    there too (not at 1e-30), so its float32-floored log-loss equals probmetrics' own
    LogLoss on the reference's predictions, certain misses included."""
    from probmetrics.metrics import Metrics

    p1 = rng.uniform(0, 1, 3000).astype(np.float32)
    y = (rng.random(3000) < np.clip(1.4 * p1 - 0.2, 0, 1)).astype(int)
    cal, test = slice(0, 1000), slice(1000, None)
    y_test = y[test].copy()
    y_test[np.argmax(p1[test])] = 0  # a certain miss: CIR predicts class 1 with p = 1 there
    probs = np.column_stack([1 - p1, p1]).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = pc.CenteredIsotonicRegressionCalibrator().fit(p1[cal], y[cal])
        expected = np.asarray(reference.predict_proba(p1[test]), dtype=np.float64)
    assert (expected == 0).any()
    published = Metrics.from_names(["logloss"]).compute_all_from_labels_probs(
        torch.as_tensor(y_test), torch.as_tensor(expected)
    )["logloss"]
    ours = make_calibrator("cir").fit(probs_to_logits(probs[cal]), y[cal])
    predicted = ours.predict_proba(probs_to_logits(probs[test]))
    np.testing.assert_allclose(predicted, expected, atol=1e-30, rtol=1e-12)
    # within float32 rounding of the floor; 1e-30 would have cost 18.3 / 2000 = 9e-3 more
    assert log_loss(predicted, y_test, floor="float32") == pytest.approx(float(published), abs=1e-7)
    assert log_loss(predicted, y_test) < 90  # calbench's own log-loss stays finite


@pytest.mark.parametrize(
    "name, atol", [("lightgbm", 1e-12), ("catboost", 1e-12), ("xgboost", 1e-6)]
)
def test_a_binary_boosting_calibrator_sees_class_1s_log_odds_as_calarenas(rng, name, atol):
    """On two classes probmetrics gives its trees one feature, class 1's float32 log-odds
    (``binary_probs_to_logits``), not both classes' log-probabilities."""
    p1 = rng.beta(0.6, 0.6, 1500).astype(np.float32)
    y = (rng.random(1500) < p1**1.3).astype(int)
    probs = np.column_stack([1 - p1, p1]).astype(np.float32)
    factory = {"lightgbm": pc.LightGBMCalibrator, "catboost": pc.CatBoostCalibrator}
    reference = factory.get(name, pc.XGBoostCalibrator)()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = np.asarray(reference.fit(p1[:1000], y[:1000]).predict_proba(p1[1000:]))
        model = make_calibrator(name).fit(probs_to_logits(probs[:1000]), y[:1000])
    ours = model.predict_proba(probs_to_logits(probs[1000:]))
    np.testing.assert_allclose(ours, expected, atol=atol, rtol=0)


def test_beta_calarena_is_betacal_on_the_stored_float32_scores(rng):
    """CalArena's Beta: probmetrics' BetacalCalibrator (betacal on class 1's float32
    probability, clipped at float32's epsilon). Where many scores are exactly 1.0 in float32
    it differs from calbench's float64 `beta`."""
    z = rng.normal(8, 8, 2000)
    p1 = (1 / (1 + np.exp(-z))).astype(np.float32)  # a confident network's float32 scores
    y = (rng.random(2000) < 1 / (1 + np.exp(-z / 3))).astype(int)
    assert (p1 == 1).mean() > 0.1
    probs = np.column_stack([1 - p1, p1]).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = pc.BetacalCalibrator().fit(p1[:1200], y[:1200])
        expected = np.asarray(reference.predict_proba(p1[1200:]), dtype=np.float64)
        ours = make_calibrator("beta_calarena").fit(probs_to_logits(probs[:1200]), y[:1200])
        plain = make_calibrator("beta").fit(probs_to_logits(probs[:1200]), y[:1200])
    got = ours.predict_proba(probs_to_logits(probs[1200:]))
    np.testing.assert_allclose(got, expected, atol=1e-7, rtol=0)
    assert np.abs(plain.predict_proba(probs_to_logits(probs[1200:])) - got).max() > 1e-3
