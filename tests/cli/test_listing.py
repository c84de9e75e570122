"""``calbench list``: every name the command line accepts, one described line each."""

import json

import pytest

from calbench.cli import main
from calbench.conf_files import group_files
from calbench.listing import KINDS, _first_sentence, catalogue
from calbench.metrics import METRICS


@pytest.mark.parametrize("kind", KINDS)
def test_every_name_is_listed_once_with_a_description(kind):
    names = [r["name"] for r in catalogue(kind)]
    expected = {
        "methods": group_files("method"),
        "metrics": METRICS,
        "presets": group_files("experiment"),
        "datasets": group_files("dataset"),
    }.get(kind)
    if expected is not None:
        assert sorted(names) == sorted(expected)
    assert len(names) == len(set(names)) > 0
    blank = [r["name"] for r in catalogue(kind) if len(r["description"]) < 10]
    assert not blank, f"{kind} without a description: {blank}"


def test_methods_say_family_input_and_what_they_search(capsys):
    main(["list", "methods", "--json"])
    records = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert records["dir_odir"]["searched"] == "reg_lambda, reg_mu"
    assert records["dir_odir"]["input"] == "probabilities"
    assert records["ts_knn_kl"]["family"] == "composition"
    assert records["spline_gupta"]["searched"] == "-"
    # runs on the data sets its authors tuned it for only (it said "-")
    assert records["dir_odir_gupta_keras"]["searched"] == "tuned: 8 data sets only"
    main(["list", "calibrators", "--json"])
    records = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert records["dir_l2"]["fixes"] == "regularization=l2"
    assert "I/T (not 0) at lambda 5k/n" in records["dir_l2"]["default strengths"]
    assert "(100, 10, 1, 0.1, 0) x k^2/2n" in records["ms_odir"]["default strengths"]
    assert records["ts"]["default strengths"] == "-"
    main(["list", "metrics"])
    text = capsys.readouterr().out
    assert text.splitlines()[0].split() == ["name", "needs", "better", "description"]
    assert any(line.startswith("accuracy") and "higher" in line for line in text.splitlines())


def test_a_first_sentence_does_not_end_at_et_al():
    assert _first_sentence("Gupta et al. sec. 6 / Tables 1-2. More.") == (
        "Gupta et al. sec. 6 / Tables 1-2."
    )
    assert _first_sentence("x" * 200).endswith("...")
