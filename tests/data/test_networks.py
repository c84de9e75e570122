"""The networks beyond the papers': their loaders on the shared files (checksums, shapes, the
accuracies their README states), the split rule of single-part sets, and user npz files."""

import numpy as np
import pytest

from calbench.conf_files import read_group
from calbench.data import load_dataset
from calbench.data.registry import registered_sets
from calbench.data.split import split_rows
from calbench.errors import CalbenchError
from tests.conftest import load_network as _load

NETWORKS = {
    # name: (classes, calibration rows, test rows)
    "c10_lenet5_netcal": (10, 5000, 5000),
    "c10_wrn16_4_netcal": (10, 5000, 5000),
    "c100_densenet_bc100_netcal": (100, 5000, 5000),
    "c100_lenet5_netcal": (100, 5000, 5000),
    "c100_wrn16_4_netcal": (100, 5000, 5000),
    "c10_resnet50_xent": (10, 5000, 10000),
    "c10_resnet50_focal": (10, 5000, 10000),
}


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_each_network_loads_with_its_shapes_and_its_stated_accuracy(name, more_networks):
    k, n_cal, n_test = NETWORKS[name]
    registered = registered_sets()[name]
    assert registered.source["commit"] and registered.licence in ("Apache-2.0", "MIT")
    ds = _load(name, more_networks)
    assert (ds.n_classes, len(ds.y_cal), len(ds.y_test)) == (k, n_cal, n_test)
    assert ds.name == name
    if registered.kind == "probabilities":
        # netcal's README accuracy is over all 10000 rows of the file.
        correct = (ds.logits_cal.argmax(1) == ds.y_cal).sum()
        correct += (ds.logits_test.argmax(1) == ds.y_test).sum()
        assert correct / 10000 == pytest.approx(registered.accuracy, abs=5e-5)
        assert not ds.is_logits
        assert np.bincount(ds.y_cal).tolist() == [n_cal // k] * k  # stratified halves
    else:
        accuracy = (ds.logits_test.argmax(1) == ds.y_test).mean()
        assert accuracy == pytest.approx(registered.accuracy, abs=5e-5)
        assert ds.is_logits


def test_a_network_file_with_other_bytes_is_refused(more_networks, tmp_path):
    import shutil

    name = "wideresnet-16-4-cifar-10.npz"
    shutil.copy(more_networks / name, tmp_path / name)
    with np.load(tmp_path / name) as f:
        arrays = dict(f)
    arrays["ground_truth"][0] = (arrays["ground_truth"][0] + 1) % 10
    np.savez(tmp_path / name, **arrays)
    with pytest.raises(CalbenchError, match="not the published file's"):
        _load("c10_wrn16_4_netcal", tmp_path)


def test_superclasses_of_a_netcal_network_sum_its_fine_probabilities(more_networks):
    fine = _load("c100_wrn16_4_netcal", more_networks)
    coarse = _load("c100_wrn16_4_netcal_superclass", more_networks)
    mapping = np.array(read_group("dataset")["c100_superclass"]["fine_to_coarse"])
    np.testing.assert_array_equal(coarse.y_test, mapping[fine.y_test])
    summed = np.zeros((len(fine.y_test), 20))
    np.add.at(summed.T, mapping, fine.probs_test.T)
    np.testing.assert_allclose(coarse.probs_test, summed, atol=1e-9)
    assert coarse.class_names[18:] == ["vehicles_1", "vehicles_2"]
    # Coarse accuracy is at least fine accuracy (a right fine class is a right superclass).
    fine_acc = (fine.probs_test.argmax(1) == fine.y_test).mean()
    assert (coarse.probs_test.argmax(1) == coarse.y_test).mean() >= fine_acc


def test_the_split_is_stratified_seeded_disjoint_and_complete():
    y = np.repeat(np.arange(7), [10, 20, 30, 40, 50, 60, 90])
    cal, test = split_rows(y, 0.3, seed=4)
    assert len(np.intersect1d(cal, test)) == 0
    np.testing.assert_array_equal(np.sort(np.concatenate([cal, test])), np.arange(len(y)))
    assert len(cal) == round(0.3 * len(y))
    # Every class in (about) the same share: stratified.
    shares = np.bincount(y[cal], minlength=7) / np.bincount(y)
    assert np.abs(shares - 0.3).max() < 0.06
    again, _ = split_rows(y, 0.3, seed=4)
    other, _ = split_rows(y, 0.3, seed=5)
    np.testing.assert_array_equal(cal, again)
    assert not np.array_equal(cal, other)
    assert len(split_rows(y, 120, seed=0)[0]) == 120  # a count of rows
    with pytest.raises(CalbenchError, match="single row"):
        split_rows(np.array([0, 0, 1, 1, 2]), 0.5)
    with pytest.raises(CalbenchError, match="cal_size"):
        split_rows(y, 1.0)


def test_a_users_single_set_npz_is_split_by_the_same_rule(tmp_path, rng):
    z = rng.normal(size=(300, 4))
    y = rng.integers(0, 4, 300)
    np.savez(tmp_path / "one.npz", logits=z, y=y)
    ds = load_dataset("npz", path=tmp_path / "one.npz", split={"cal_size": 0.4, "seed": 2})
    cal, test = split_rows(y, 0.4, seed=2)
    np.testing.assert_array_equal(ds.logits_cal, z[cal])
    np.testing.assert_array_equal(ds.y_test, y[test])
    assert ds.is_logits
    # Probabilities under other key names, as netcal writes them.
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    np.savez(tmp_path / "probs.npz", predictions=p, ground_truth=y)
    keys = {"probs": "predictions", "y": "ground_truth"}
    ds = load_dataset("npz", path=tmp_path / "probs.npz", keys=keys)
    assert not ds.is_logits and len(ds.y_cal) == 150
    with pytest.raises(CalbenchError, match="no key 'scores'"):
        load_dataset("npz", path=tmp_path / "probs.npz", keys={"probs": "scores"})
    with pytest.raises(CalbenchError, match="unknown key"):
        load_dataset("npz", path=tmp_path / "one.npz", split={"share": 0.5})


def test_a_torch_pair_reads_gpu_saved_tensors_on_the_cpu(tmp_path, rng):
    torch = pytest.importorskip("torch")
    z = torch.tensor(rng.normal(size=(40, 3)), dtype=torch.float32)
    y = torch.tensor(np.arange(40) % 3)
    torch.save((z[:20], y[:20]), tmp_path / "cal.pt")
    torch.save((z[20:], y[20:]), tmp_path / "test.pt")
    ds = load_dataset("torch_pair", path_cal=tmp_path / "cal.pt", path_test=tmp_path / "test.pt")
    np.testing.assert_allclose(ds.logits_test, z[20:].double().numpy())
    (tmp_path / "bad.pt").write_bytes(b"not a torch file")
    with pytest.raises(CalbenchError, match="torch-saved tuple"):
        load_dataset("torch_pair", path_cal=tmp_path / "bad.pt", path_test=tmp_path / "test.pt")


@pytest.mark.slow
def test_real_networks_preset_then_leaderboard_and_claims(more_networks, tmp_path):
    """The whole panel on one network from the shared files (about 3 minutes on 2 cores),
    then the leaderboard and the claims from the command line, as `make networks` runs."""
    import subprocess
    import sys

    import pandas as pd

    def calbench(*args):
        out = subprocess.run(
            [sys.executable, "-m", "calbench.cli", *args], capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout

    present = calbench("data", "present", "real_networks", "--data-dir", str(more_networks))
    assert "c10_wrn16_4_netcal" in present.split(",")
    calbench(
        "run",
        "-m",
        "experiment=real_networks",
        "dataset=c10_wrn16_4_netcal",
        f"data_dir={more_networks}",
        f"results_dir={tmp_path}",
    )
    panel = read_group("experiment")["real_networks"]["hydra"]["sweeper"]["params"]["method"]
    calbench("leaderboard", "real_networks", "--results-dir", str(tmp_path), "--resamples", "200")
    board = pd.read_csv(tmp_path / "leaderboards" / "real_networks_log_loss.csv", index_col=0)
    assert set(board.index) == set(panel.split(","))
    assert board.loc["ts", "mean_rank"] < board.loc["uncal", "mean_rank"]
    assert (tmp_path / "leaderboards" / "real_networks_log_loss_winrate.png").is_file()
    calbench("claims", "real_networks", "--results-dir", str(tmp_path), "--resamples", "200")
    claims = pd.read_csv(tmp_path / "claims" / "real_networks.csv")
    # Every claim is checked on this CIFAR-10 network, with every method it names present.
    assert len(claims) == 7 and set(claims["verdict"]) <= {"holds", "fails", "undecided"}
