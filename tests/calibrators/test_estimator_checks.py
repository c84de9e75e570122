"""scikit-learn's own estimator checks over every registered calibrator.

A calibrator is a classifier whose features are the class scores: ``fit(logits, y)`` needs
one column per class and labels that index the columns (`calbench.validation`). The checks
below feed arbitrary feature matrices and label sets, so they test a contract calbench does
not offer; each is listed with why. Every other check (clone, get/set_params, no work in
``__init__``, pickling, NaN/inf refused, idempotent fit, ``predict`` = argmax of
``predict_proba``, ...) must pass for every calibrator.
"""

import warnings

import pytest
from sklearn.utils.estimator_checks import check_estimator

from calbench.calibrators import CALIBRATORS, make_calibrator
from tests.calibrators.own_calibrator import OWN_CALIBRATOR

_SCORES_ARE_CLASSES = (
    "X is a score per class, so y must index X's columns; the check fits 2-column X with "
    "3 labels (or string labels)"
)
NOT_APPLICABLE = {
    # Parameters unchanged by fit: checked on scores calbench accepts, for every
    # calibrator, by test_calibrators.test_parameters_are_unchanged_by_fit.
    "check_estimators_overwrite_params": _SCORES_ARE_CLASSES,
    "check_estimators_fit_returns_self": _SCORES_ARE_CLASSES,
    "check_readonly_memmap_input": _SCORES_ARE_CLASSES,
    "check_classifier_data_not_an_array": _SCORES_ARE_CLASSES,
    "check_classifiers_train": _SCORES_ARE_CLASSES,
    "check_classifiers_classes": _SCORES_ARE_CLASSES,
    "check_supervised_y_2d": _SCORES_ARE_CLASSES,
    "check_classifiers_one_label": (
        "a calibration set of one class names no other column's map; calbench refuses it or "
        "keeps the scores' own ranking"
    ),
    "check_n_features_in": "the number of features is the number of classes (n_classes_)",
    "check_n_features_in_after_fitting": "as above: n_classes_, not n_features_in_",
    "check_fit2d_1feature": "one column is one class: calbench's own error says so",
    "check_fit2d_predict1d": "calbench's own error (shape) instead of scikit-learn's wording",
    "check_estimators_empty_data_messages": "calbench's own error instead of scikit-learn's",
    "check_complex_data": "calbench's own error (not real scores) instead of scikit-learn's",
    "check_dtype_object": "calbench's own error (integer labels) instead of scikit-learn's",
    "check_classifiers_regression_target": "calbench's own error instead of scikit-learn's",
    "check_requires_y_none": "calbench's own error instead of scikit-learn's",
    "check_estimator_sparse_tag": "scores are dense (n, k) arrays; sparse input is refused",
    "check_estimator_sparse_array": "as above",
    "check_estimator_sparse_matrix": "as above",
    "check_fit2d_1sample": "one sample cannot calibrate; the refusal is calbench's wording",
    "check_non_transformer_estimators_n_iter": (
        "n_iter_ counts optimiser steps where a map has one; a fit that starts at its "
        "optimum (the identity on these data) takes none"
    ),
}

#: Checks that do not apply to one calibrator, and why.
NOT_APPLICABLE_TO = {
    "spline": {
        "check_estimators_nan_inf": "the check fits 10 samples; 6 knots need 12 (it says so)"
    },
    "spline_gupta_code": {  # Gupta's procedure twin of the spline (calbench.papers.gupta2021)
        "check_estimators_nan_inf": "the check fits 10 samples; 6 knots need 12 (it says so)"
    },
    "spline_gupta_every_rank_code": {  # Gupta's Table 5 twin (calbench.papers.gupta2021)
        "check_estimators_nan_inf": "the check fits 10 samples; 6 knots need 12 (it says so)"
    },
    "valk_dec": {
        "check_methods_subset_invariance": "Valk's whole-array float32 softmax, as his code "
        "computed it: a row's probabilities depend on the largest logit predicted with it"
    },
}

#: Calibrators whose checks take tens of seconds (training networks, random searches):
#: make test-slow runs them.
SLOW = {"iop_full", "iop_diag", "dec", "hoki", "spline_lucena", "forest", "catboost"}  # 5 s+ each


def _identity(probs):
    """A known true map that pickles (a module-level function)."""
    return probs


def _instance(name):
    if name == "true_map":
        return make_calibrator(name, true_map=_identity)
    calibrator = make_calibrator(name)
    if name.startswith("keras"):
        calibrator.set_params(max_epochs=3)  # the checks test the contract, not the training
    if name == "valk_forest":  # likewise: 3 trees, not 250 x 12 depths x 10 folds
        calibrator.set_params(n_trees=3, depths=(1, 2), n_cv_folds=2)
    if name == "valk_dec":  # 6 Adam steps, not a million
        calibrator.set_params(n_critics=2, epochs=2, steps=3)
    if name == "valk_knn":  # the checks' sets are smaller than his smallest k
        calibrator.set_params(ks=(2, 4), n_cv_folds=2)
    if name == "rahimi_iop_diag":  # 11 quadrature nodes and 30 L-BFGS steps, not 51 and 2000
        calibrator.set_params(nb_steps=10, max_iter=30)
    return calibrator


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
        for n in [*sorted(CALIBRATORS), OWN_CALIBRATOR]
    ],
)
def test_scikit_learn_estimator_checks(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence on the checks' random data
        results = check_estimator(_instance(name), on_fail=None)
    failed = {
        r["check_name"]: str(r["exception"])[:300] for r in results if r["status"] == "failed"
    }
    skip = {**NOT_APPLICABLE, **NOT_APPLICABLE_TO.get(name, {})}
    unexpected = {check: why for check, why in failed.items() if check not in skip}
    assert not unexpected, unexpected
