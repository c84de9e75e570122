"""Defaults that do no harm: every penalised map made with no arguments, fitted on a real
network's calibration part, has a held-out log-loss at most the uncalibrated one (issue 42).
The ImageNet-shaped case is `benchmarks/bench_defaults.py` (minutes a map)."""

import pytest

from calbench.calibrators import make_calibrator
from calbench.metrics import log_loss
from calbench.simplex import softmax
from tests.conftest import load_network

#: The maps with penalties whose strengths the defaults set.
PENALISED = ("ms_odir", "dir_odir", "dir_l2", "svs", "sms")
#: (network, its data folder's fixture): Kull et al.'s DenseNet-40 and more_networks.
TEN_CLASSES = [
    ("c10_densenet40", "published_logits"),
    ("c10_lenet5_netcal", "more_networks"),
    ("c10_wrn16_4_netcal", "more_networks"),
]
#: The rest, in the slow suite (the quick suite stays under 7 minutes).
SLOW = [
    ("c10_resnet50_xent", "more_networks"),
    ("c10_resnet50_focal", "more_networks"),
    ("c100_densenet_bc100_netcal", "more_networks"),
    ("c100_lenet5_netcal", "more_networks"),
    ("c100_wrn16_4_netcal", "more_networks"),
]


def _held_out(network, folder, request):
    ds = load_network(network, request.getfixturevalue(folder))
    uncalibrated = log_loss(softmax(ds.logits_test), ds.y_test)
    losses = {}
    for name in PENALISED:
        model = make_calibrator(name).fit(ds.logits_cal, ds.y_cal)
        losses[name] = log_loss(model.predict_proba(ds.logits_test), ds.y_test)
    return uncalibrated, losses


def _assert_no_harm(uncalibrated, losses):
    harmful = {name: round(v, 4) for name, v in losses.items() if v > uncalibrated}
    assert not harmful, f"worse than uncalibrated ({uncalibrated:.4f}): {harmful}"


@pytest.mark.parametrize(("network", "folder"), TEN_CLASSES)
def test_defaults_do_no_harm(network, folder, request):
    _assert_no_harm(*_held_out(network, folder, request))


@pytest.mark.slow
@pytest.mark.parametrize(("network", "folder"), SLOW)
def test_defaults_do_no_harm_on_the_other_networks(network, folder, request):
    _assert_no_harm(*_held_out(network, folder, request))


@pytest.mark.slow
def test_the_defaults_beat_kulls_free_diagonal_and_l2_on_wide_resnet_cifar100(more_networks):
    """Where the old defaults harmed or lagged: Wide-ResNet-16-4 on CIFAR-100 (netcal),
    uncalibrated 0.9550. Kull's L2 towards 0 at the default strength gave 0.9788; the free
    diagonal 0.9245 for MS-ODIR."""
    ds = load_network("c100_wrn16_4_netcal", more_networks)
    uncalibrated = log_loss(softmax(ds.logits_test), ds.y_test)

    def held_out(name, **params):
        model = make_calibrator(name, **params).fit(ds.logits_cal, ds.y_cal)
        return log_loss(model.predict_proba(ds.logits_test), ds.y_test)

    assert uncalibrated == pytest.approx(0.9550, abs=5e-5)
    assert held_out("ms_odir") <= held_out("ms_odir", reg_diagonal=0.0)
    l2 = held_out("dir_l2")
    assert l2 < uncalibrated - 0.02
    k, n = 100, len(ds.y_cal)
    assert held_out("dir_l2", reg_lambda=k / (2 * n)) > uncalibrated
