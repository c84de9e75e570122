"""Kull 4.1's non-neural protocol: classifiers trained fold by fold, scores cached, the
calibrated predictions of the inner parts averaged."""

import json

import numpy as np
import pytest
from sklearn.naive_bayes import GaussianNB
from sklearn.preprocessing import StandardScaler

from calbench.calibrators import make_calibrator
from calbench.data import FeatureSet, load_dataset
from calbench.data.classifier_scores import scored_folds
from calbench.data.classifiers import make_classifier
from calbench.errors import CalbenchError
from calbench.metrics import accuracy, log_loss
from calbench.runner.cell import run_cell
from calbench.runner.plan import plan_cell
from calbench.runner.protocols import Protocol
from calbench.simplex import softmax
from tests.runner.test_runner import config

NBAYES = {"name": "nbayes", "estimator": "sklearn.naive_bayes.GaussianNB", "params": {}}


def iris(classifier=NBAYES):
    return load_dataset("tabular", source="iris", classifier=classifier)


def test_folds_partition_the_data_and_scores_match_an_independent_classifier(tmp_path):
    data = iris()
    folds = scored_folds(data, repeats=2, outer_folds=5, calibration_folds=3, cache_dir=tmp_path)
    assert len(folds) == 10
    n = len(data.y)
    for r in range(2):
        tests = np.concatenate([f.test_index for f in folds[5 * r : 5 * r + 5]])
        np.testing.assert_array_equal(np.sort(tests), np.arange(n))  # each sample tested once
    fold = folds[7]
    train = np.setdiff1d(np.arange(n), fold.test_index)
    cal = np.concatenate([p.cal_index for p in fold.parts])
    np.testing.assert_array_equal(np.sort(cal), train)  # the parts split the training part
    # Reference: scikit-learn's own scaler + naive Bayes on the other two parts.
    part = fold.parts[1]
    fit_idx = np.setdiff1d(train, part.cal_index)
    scaler = StandardScaler().fit(data.features[fit_idx])
    nb = GaussianNB().fit(scaler.transform(data.features[fit_idx]), data.y[fit_idx])
    expected = nb.predict_proba(scaler.transform(data.features[fold.test_index]))
    np.testing.assert_allclose(softmax(part.test_logits), expected, atol=1e-12)
    # Its scores of its own training part, where Kull et al. choose the grid points.
    np.testing.assert_array_equal(part.train_index, fit_idx)
    own = nb.predict_proba(scaler.transform(data.features[fit_idx]))
    np.testing.assert_allclose(softmax(part.train_logits), own, atol=1e-12)


def test_scores_are_cached_once_per_classifier_setting(tmp_path):
    first = scored_folds(iris(), repeats=1, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == 1
    again = scored_folds(iris(), repeats=1, cache_dir=tmp_path)
    for a, b in zip(first, again, strict=True):
        for pa, pb in zip(a.parts, b.parts, strict=True):
            np.testing.assert_array_equal(pa.cal_logits, pb.cal_logits)
            np.testing.assert_array_equal(pa.test_logits, pb.test_logits)
    smoothed = dict(NBAYES, params={"var_smoothing": 1e-3})
    scored_folds(iris(smoothed), repeats=1, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == 2  # other settings, other file


def test_uncalibrated_cell_averages_the_three_classifiers(tmp_path):
    cfg = config(
        "dataset=keel_iris",
        "classifier=nbayes",
        "protocol=kull_uci",
        "protocol.repeats=1",
        "method=uncal",
        "metrics=kull_uci",
        f"data_dir={tmp_path}",
    )
    rows = run_cell(plan_cell(cfg))
    assert set(rows["classifier"]) == {"nbayes"} and set(rows["protocol"]) == {"classifier_cv"}
    data = iris()
    # Reference: the same splits, naive Bayes trained directly, probabilities averaged.
    for fold in scored_folds(data, repeats=1, cache_dir=tmp_path / "classifier_scores"):
        train = np.setdiff1d(np.arange(len(data.y)), fold.test_index)
        probs = []
        for part in fold.parts:
            fit_idx = np.setdiff1d(train, part.cal_index)
            scaler = StandardScaler().fit(data.features[fit_idx])
            nb = GaussianNB().fit(scaler.transform(data.features[fit_idx]), data.y[fit_idx])
            probs.append(nb.predict_proba(scaler.transform(data.features[fold.test_index])))
        mean = np.mean(probs, axis=0)
        y = data.y[fold.test_index]
        got = rows[rows["fold"] == fold.index].set_index("metric")["value"]
        assert got["accuracy"] == pytest.approx(accuracy(mean, y), abs=1e-12)
        assert got["log_loss"] == pytest.approx(log_loss(mean, y), rel=1e-9)


def test_dir_l2_lambda_is_chosen_on_the_classifiers_training_part(tmp_path):
    cfg = config(
        "dataset=keel_iris",
        "classifier=lda",
        "protocol=kull_uci",
        "protocol.repeats=1",
        "method=dir_l2_kull_uci",
        "metrics=kull_uci",
        f"data_dir={tmp_path}",
    )
    rows = run_cell(plan_cell(cfg))
    assert rows.groupby("fold").size().nunique() == 1 and rows["fold"].nunique() == 5
    grid = list(cfg.method.grid.reg_lambda)
    data = load_dataset(
        "tabular",
        source="iris",
        classifier={
            "name": "lda",
            "estimator": "sklearn.discriminant_analysis.LinearDiscriminantAnalysis",
            "params": {},
        },
    )
    folds = scored_folds(data, repeats=1, cache_dir=tmp_path / "classifier_scores")
    for fold in folds[:2]:
        chosen = json.loads(rows[rows["fold"] == fold.index]["params"].iat[0])
        assert len(chosen) == 3  # one lambda per calibration part
        for part, got in zip(fold.parts, chosen, strict=True):
            # Reference: every lambda fitted on the calibration part, rated by the clipped
            # log-loss on the classifier's training part; the first best wins.
            losses = [
                log_loss(
                    make_calibrator(
                        "dir_l2", reg_lambda=lam, penalise_intercept=True, reference_class=True
                    )
                    .fit(part.cal_logits, data.y[part.cal_index])
                    .predict_proba(part.train_logits),
                    data.y[part.train_index],
                    clip=1e-15,
                )
                for lam in grid
            ]
            assert got["reg_lambda"] == grid[int(np.argmin(losses))]


def _protocol(name, **options):
    return Protocol.of({"name": name, "inner_folds": 3, "average_inner_models": False, **options})


def test_select_on_must_name_a_known_place(tmp_path):
    with pytest.raises(CalbenchError, match="'select_on' parameter"):
        list(_protocol("classifier_cv", select_on="test", cache_dir=None).folds(iris()))


def test_protocol_and_data_kind_must_match(tmp_path):
    scores = load_dataset("synthetic_dirichlet", n_cal=300, n_test=300)
    with pytest.raises(CalbenchError, match="needs a feature set"):
        list(_protocol("classifier_cv").folds(scores))
    with pytest.raises(CalbenchError, match="protocol=classifier_cv"):
        list(_protocol("holdout").folds(iris()))
    with pytest.raises(CalbenchError, match="pick the classifier"):
        load_dataset("tabular", source="iris", classifier={"name": "none"})


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"name": "x"}, "no estimator import path"),
        ({"name": "x", "estimator": "sklearn.svm.Nope"}, "cannot import"),
        ({"name": "x", "estimator": "sklearn.svm.SVC", "params": {"bogus": 1}}, "bad params"),
        ({"name": "x", "estimator": "sklearn.svm.SVC"}, "probability: true"),
        ({"name": "x", "estimator": "sklearn.preprocessing.StandardScaler"}, "not a classifier"),
    ],
)
def test_bad_classifier_configs_get_one_clear_error(spec, message):
    with pytest.raises(CalbenchError, match=message):
        make_classifier(spec)


#: UCI's descriptions of the sets as Kull et al.'s code builds them: samples (after the rows
#: with missing values their code drops: cleveland 6, dermatology 8), features, class counts.
#: Their abalone predicts the sex (mldata's first column), not the rings.
KULL_UCI_SHAPES = {
    "abalone": (4177, 8, [1307, 1342, 1528]),
    "balance-scale": (625, 4, [49, 288, 288]),
    "car": (1728, 6, [384, 69, 1210, 65]),
    "cleveland": (297, 13, [160, 54, 35, 35, 13]),
    "dermatology": (358, 34, [111, 60, 71, 48, 48, 20]),
    "glass": (214, 9, [70, 76, 17, 13, 9, 29]),
    "iris": (150, 4, [50, 50, 50]),
    "landsat-satellite": (6435, 36, [1533, 703, 1358, 626, 707, 1508]),
    "libras-movement": (360, 90, [24] * 15),
    "mfeat-karhunen": (2000, 64, [200] * 10),
    "mfeat-morphological": (2000, 6, [200] * 10),
    "mfeat-zernike": (2000, 47, [200] * 10),
    "optdigits": (5620, 64, [554, 571, 557, 572, 568, 558, 558, 566, 554, 562]),
    "page-blocks": (5473, 10, [4913, 329, 28, 88, 115]),
    "pendigits": (10992, 16, [1143, 1143, 1144, 1055, 1144, 1055, 1056, 1142, 1055, 1055]),
    "segment": (2310, 19, [330] * 7),
    "vehicle": (846, 18, [212, 217, 218, 199]),
    "vowel": (990, 10, [90] * 11),
    "waveform-5000": (5000, 40, [1692, 1653, 1655]),
    "yeast": (1484, 8, [463, 5, 35, 44, 51, 163, 244, 429, 20, 30]),
}


@pytest.mark.parametrize("name", sorted(KULL_UCI_SHAPES))
def test_kulls_uci_files_have_the_uci_shapes(kull_uci_files, name):
    from calbench.data import load_dataset

    n, d, counts = KULL_UCI_SHAPES[name]
    fs = load_dataset("kull_uci", source=name, classifier={"name": "lda"}, path=kull_uci_files)
    assert fs.features.shape == (n, d)
    assert np.bincount(fs.y).tolist() == counts
    assert np.isfinite(fs.features).all()


def test_every_kull_uci_set_is_registered_with_its_files_and_sums():
    from calbench.data.registry import registered_sets
    from calbench.papers.kull2019.uci_files import KULL_UCI_NAMES, files_of

    sets = registered_sets()
    for name in KULL_UCI_NAMES:
        reg = sets["uci_" + name.replace("-", "_")]
        assert [f.name for f in reg.files] == files_of(name)
        assert all(len(f.sha256) == 64 and f.urls[0].startswith("https://raw.") for f in reg.files)
        assert all("54989edf11995f7f0f8390766e51133373044db2" in f.urls[0] for f in reg.files)


def test_a_missing_kull_file_names_the_fetch(tmp_path):
    from calbench.data import load_dataset

    with pytest.raises(CalbenchError, match="calbench data fetch uci_balance_scale"):
        load_dataset("kull_uci", source="balance-scale", classifier={"name": "lda"}, path=tmp_path)


def test_rare_class_check_is_the_exact_fold_condition(rng):
    """13 samples of a class suffice for 5 outer folds x 3 calibration parts (10 stay in
    each training part: Kull's cleveland); 11 with 5 x 3 still do (8 left), 3 do not."""
    x = rng.normal(size=(200, 3))
    for rare, ok in ((13, True), (11, True), (4, False)):
        y = np.zeros(200, dtype=int)
        y[:rare] = 1
        y[rare : rare + 60] = 2
        data = FeatureSet("toy", x, y, classifier=NBAYES)
        if ok:
            assert len(scored_folds(data, repeats=1, outer_folds=5, calibration_folds=3)) == 5
        else:
            with pytest.raises(CalbenchError, match="class 1 has 4 samples, too few for 5"):
                scored_folds(data, repeats=1, outer_folds=5, calibration_folds=3)
