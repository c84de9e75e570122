"""The published-CSV reader refuses a file without one of its columns, naming both."""

from types import SimpleNamespace

import pytest

from calbench.errors import CalbenchError
from calbench.reproduce import published as published_module


def test_a_published_csv_without_scale_is_refused_by_name(tmp_path, monkeypatch):
    path = tmp_path / "mine_table1.csv"
    path.write_text(
        "paper,table,preset,dataset,column,method,metric,value\n"
        "mine,1,mine_preset,iris,ECE,ts,confidence_ece,1.5\n"
    )
    pack = SimpleNamespace(name="mine")
    monkeypatch.setattr(published_module, "_csv_files", lambda name=None: [(pack, path)])
    published_module._read_all.cache_clear()
    try:
        with pytest.raises(CalbenchError, match=r"mine_table1\.csv.*no column 'scale'"):
            published_module.published()
    finally:
        published_module._read_all.cache_clear()
