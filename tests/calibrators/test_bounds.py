"""The pseudo-count bound (`calbench.calibrators.bounds`) and every method's certainty claim,
checked on the published DenseNet-40 CIFAR-10 logits and on synthetic data."""

import numpy as np
import pytest

from calbench.calibrators import make_calibrator
from calbench.calibrators.bounds import certain_rows, pseudo_count_floor, with_pseudo_count
from calbench.calibrators.methods import method_configs
from calbench.data import load_dataset
from calbench.metrics.scoring import wrong_certainties
from calbench.simplex import probs_to_logits
from tests.calibrators.own_calibrator import OWN_CALIBRATOR
from tests.papers.valk2022.test_reference_dec import SMALL_DEC
from tests.papers.valk2022.test_reference_forest import SMALL_FOREST
from tests.papers.valk2022.test_reference_iop import SMALL_IOP
from tests.papers.valk2022.test_reference_knn import SMALL_KNN

#: Methods that run on any data set (tuned ones only where their authors tuned them), and a
#: user's own calibrator (``module:Class``).
UNTUNED = [*sorted(n for n, m in method_configs().items() if not m.get("tuned")), OWN_CALIBRATOR]


#: The papers' procedures as their authors' code runs them take minutes by default
#: (thousands of trees, a million Adam steps, 4096 neighbours, 2000 L-BFGS iterations on
#: 51 quadrature nodes); the claim holds at any size.
SMALL = {
    **{
        name: SMALL_FOREST
        for name in (
            "forest_valk_code",
            "forest_valk_depths14",
            "ts_forest_valk_code",
            "ts_forest_valk_stops",
        )
    },
    **{name: SMALL_KNN for name in ("knn_kl_valk_code", "ts_knn_euc_valk_code")},
    "ts_dec_valk_code": SMALL_DEC,
    "iop_diag_rahimi_code": SMALL_IOP,
}


def _fit_predict(name, data, **params):
    params = {**SMALL.get(name, {}), **params}
    calibrator = make_calibrator(name, **params).fit(data.logits_cal, data.y_cal)
    return calibrator, calibrator.predict_proba(data.logits_test)


def _check_claim(calibrator, probs, y):
    """What `Calibrator.certainty` promises, on these predictions."""
    claim = calibrator.certainty()
    assert claim in ("never", "bounded", "possible")
    certain = int(certain_rows(probs).sum())
    if claim in ("never", "bounded"):
        assert certain == 0, f"claims {claim!r} but {certain} rows hold a 0 or a 1"
    if claim == "bounded":
        n, k = calibrator.n_calibration_, probs.shape[1]
        floor = pseudo_count_floor(n, k, calibrator.pseudo_count)
        assert probs.min() >= floor * (1 - 1e-9)
        assert probs.max() <= 1 - (k - 1) * floor * (1 - 1e-9)
        assert wrong_certainties(probs, y) == 0


@pytest.fixture(scope="module")
def densenet(published_logits):
    path = published_logits / "probs_densenet40_c10_logits.p"
    if not path.exists():
        pytest.skip("the DenseNet-40 CIFAR-10 logits are not in shared/data/logits")
    return load_dataset("kull_pickle", path=path)


@pytest.fixture(scope="module")
def small_synthetic():
    return load_dataset("synthetic_dirichlet", seed=3, n_cal=1500, n_test=4000)


@pytest.mark.slow  # 80 methods on the published DenseNet-40 file, about 2 min in all;
# test_certainty_claim_holds_on_synthetic_data keeps the claim in the quick suite
@pytest.mark.parametrize("name", UNTUNED)
def test_certainty_claim_holds_on_the_published_file(name, densenet):
    if name == "true_map":
        pytest.skip("true_map needs a data set whose calibration map is known")
    calibrator, probs = _fit_predict(name, densenet)
    _check_claim(calibrator, probs, densenet.y_test)


@pytest.mark.parametrize("name", UNTUNED)
def test_certainty_claim_holds_on_synthetic_data(name, small_synthetic):
    params = {"true_map": small_synthetic.true_map} if name == "true_map" else {}
    calibrator, probs = _fit_predict(name, small_synthetic, **params)
    _check_claim(calibrator, probs, small_synthetic.y_test)


def test_the_papers_maps_are_certain_where_the_bounded_ones_are_not(densenet):
    """The reason for the bound, as the issue counted it on DenseNet-40 CIFAR-10: Gupta's
    spline gives 2722 test rows a confidence of 1, 19 of them wrong (the label then gets
    exactly 0); ``spline`` (the same fit, bounded) gives none, and its log-loss is finite
    and close to TS's where Gupta's map is dominated by those 19 rows."""
    from calbench.metrics import log_loss

    _, gupta = _fit_predict("spline_gupta", densenet)
    top = gupta.max(axis=1) >= 1 - 1e-12
    assert top.sum() == 2722
    assert (top & (gupta.argmax(axis=1) != densenet.y_test)).sum() == 19
    assert wrong_certainties(gupta, densenet.y_test) == 20  # one more from the 2nd rank's 0
    _, bounded = _fit_predict("spline", densenet)
    assert certain_rows(bounded).sum() == 0
    assert log_loss(gupta, densenet.y_test) > 1.6
    assert log_loss(bounded, densenet.y_test) < 0.30
    for plain in ("isotonic_plain", "iop_full_plain", "histbin_freq_plain", "uncal"):
        assert certain_rows(_fit_predict(plain, densenet)[1]).sum() > 0, plain


@pytest.mark.parametrize(
    "bounded, plain",
    [("isotonic", "isotonic_plain"), ("iop_full", "iop_full_plain"), ("spline", "spline")],
)
def test_the_bound_is_the_plain_map_smoothed_by_one_pseudo_sample(bounded, plain, rng):
    """p' = (N p + 1/k) / (N + 1): the plain map's predictions, the ranking unchanged."""
    n, k = 600, 4
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k)) * 3
    z[np.arange(n), y] += 3
    params = {"n_knots": 6} if plain == "spline" else {}
    smoothed = make_calibrator(bounded, **params).fit(z[:400], y[:400])
    unbounded = make_calibrator(plain, **params, pseudo_count=0).fit(z[:400], y[:400])
    got, base = smoothed.predict_proba(z[400:]), unbounded.predict_proba(z[400:])
    np.testing.assert_allclose(got, (400 * base + 1 / k) / 401, rtol=1e-12, atol=1e-15)
    order = np.argsort(-base, axis=1, kind="stable")  # the plain ranking; ties stay ties
    assert (np.diff(np.take_along_axis(got, order, axis=1), axis=1) <= 1e-15).all()


def test_pseudo_count_formula_by_hand():
    """Two classes, N = 3, a = 1: 1 -> (3 + 1/2) / 4 and 0 -> (1/2) / 4."""
    out = with_pseudo_count(np.array([[1.0, 0.0]]), 3, 1.0)
    np.testing.assert_allclose(out, [[0.875, 0.125]])
    assert pseudo_count_floor(3, 2, 1.0) == 0.125


def test_the_bound_reaches_compositions(rng):
    """IROvA-TS's isotonic step takes the bound as ``second__pseudo_count``."""
    z = rng.normal(size=(500, 3)) * 4
    y = rng.integers(0, 3, 500)
    plain = make_calibrator("irova_ts").fit(z, y)
    bounded = make_calibrator("irova_ts", second__pseudo_count=1).fit(z, y)
    assert plain.certainty() == "possible" and bounded.certainty() == "bounded"
    assert certain_rows(bounded.predict_proba(z)).sum() == 0


def test_wrong_certainties_counts_labels_below_1e9():
    probs = np.array([[1.0, 0.0], [1 - 1e-10, 1e-10], [0.5, 0.5], [1e-8, 1 - 1e-8]])
    assert wrong_certainties(probs, np.array([1, 1, 1, 0])) == 2.0
    assert wrong_certainties(probs, np.array([0, 0, 0, 1])) == 0.0


def test_a_negative_pseudo_count_is_refused():
    from calbench.errors import CalbenchError

    with pytest.raises(CalbenchError, match="pseudo_count.*>= 0"):
        make_calibrator("isotonic", pseudo_count=-1).fit(probs_to_logits(np.eye(2)), [0, 1])


def test_tables_mark_the_cells_whose_predictions_held_wrong_certainties():
    """‡ on every value of a cell with wrong_certainties > 0, in Markdown, LaTeX and CSV,
    with the note in the title; none where the count is 0 or was never stored."""
    import io

    import pandas as pd

    from calbench.metrics import higher_is_better
    from calbench.tables.catalogue import build_table
    from calbench.tables.certainties import mark_wrong_certainties
    from calbench.tables.generic import generic_specs
    from calbench.tables.render import to_csv, to_latex, to_markdown
    from tests.conftest import store_row

    counts = {"spline_gupta": 20.0, "ts": 0.0}
    rows = pd.DataFrame(
        [
            store_row(method=m, dataset="d", metric=metric, value=value, config_hash=f"h-{m}")
            for m in counts
            for metric, value in (
                ("log_loss", 1.65 if m != "ts" else 0.23),
                ("wrong_certainties", counts[m]),
            )
        ]
    )
    (spec,) = generic_specs("e", rows)  # wrong_certainties itself is not ranked
    table = mark_wrong_certainties(build_table(spec, rows, higher_is_better), rows)
    md = to_markdown(table)
    assert "1.6500‡" in md and "0.2300‡" not in md and "below 1e-09" in md
    assert r"1.6500$^\ddagger$" in to_latex(table) and r"\textdaggerdbl{}" in to_latex(table)
    csv = pd.read_csv(io.StringIO(to_csv(table)))
    csv = csv[csv["row"] == "d"].set_index("column")
    assert csv.loc["spline_gupta", "wrong_certainties"] and not csv.loc["ts", "wrong_certainties"]
    older = rows[rows["metric"] != "wrong_certainties"]
    unmarked = mark_wrong_certainties(build_table(spec, older, higher_is_better), older)
    assert "‡" not in to_markdown(unmarked)
