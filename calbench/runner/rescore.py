"""``calbench rescore``: new metrics on stored cells, from their stored predictions.

Nothing is refitted: each cell's per-fold test predictions (`calbench.results.predictions`)
are scored with the named metrics, scored under the cell's own loss and prior shift, and
the rows are added to the cell's file (a metric already stored under the same name is
replaced). The cell's config keeps what it was run with and lists the added metrics under
``rescored``, so its hash and its place in tables do not change.

    calbench rescore --experiment valk_synthetic --metrics confidence_ece_size15,mce
    calbench rescore --metrics-config kull          # every metric of conf/metrics/kull.yaml
"""

from __future__ import annotations

import pandas as pd
from tqdm import tqdm

from calbench.atomic import writable
from calbench.conf_files import metric_sets
from calbench.errors import CalbenchError, unknown_name
from calbench.metrics import METRICS
from calbench.results.locks import cell_lock
from calbench.results.store import COLUMNS, ResultStore
from calbench.yaml_text import dump_yaml


def metric_options(names: list[str]) -> dict[str, dict]:
    """Output name -> options for each name: as a metrics config defines it (default.yaml
    first, then the others by name), else a registered metric function with no options."""
    sets = metric_sets()
    ordered = [sets.pop("default", {}), *sets.values()]
    defined = {}
    for metrics in reversed(ordered):  # default.yaml's definition wins
        defined.update(metrics)
    options = {}
    for name in names:
        if name in defined:
            options[name] = dict(defined[name])
        elif name in METRICS:
            options[name] = {}
        else:
            raise unknown_name("metric", name, sorted(set(defined) | set(METRICS)))
    return options


def config_metrics(name: str) -> dict[str, dict]:
    sets = metric_sets()
    if name not in sets:
        raise unknown_name("metrics config", name, sets)
    return sets[name]


def where_rows(experiment) -> str:
    return f"experiment {experiment!r}" if experiment else "the store"


def rescore(results_dir, metrics: dict[str, dict], experiment=None) -> tuple[int, list[str]]:
    """Add ``metrics`` to every stored cell (of ``experiment``, else all); returns the
    number of cells rescored and the hashes of those stored without predictions. Cells
    whose settings a later run superseded are rescored too: a procedure's spread reads
    every seed's cell (`calbench.reproduce.comparison`), and a metric whose definition
    changed must not leave old values among them."""
    store = ResultStore(results_dir)
    rows = store.read(experiment, latest=False)
    if rows.empty:
        where = f"experiment {experiment!r}" if experiment else "any experiment"
        raise CalbenchError(f"No results for {where} in {results_dir}; nothing to rescore.")
    done, missing = 0, []
    published = set(rows.loc[rows["protocol"] == "published", "config_hash"])
    if published and len(published) == rows["config_hash"].nunique():
        raise CalbenchError(
            f"{where_rows(experiment)} holds published results (imported numbers, no "
            "predictions): there is nothing to rescore; run the methods with calbench to "
            "score them anew."
        )
    for cell_hash in tqdm(
        [h for h in rows["config_hash"].unique() if h not in published],
        desc="rescoring",
        unit="cell",
    ):
        # Read, add, write under the cell's lock, from the file as it is now: another
        # rescore may have added its metrics since the read above.
        with writable(store.root), cell_lock(store.root, cell_hash):
            if _rescore_cell(store, cell_hash, metrics):
                done += 1
            else:
                missing.append(cell_hash)
    return done, missing


def _rescore_cell(store: ResultStore, cell_hash: str, metrics: dict[str, dict]) -> bool:
    """Add ``metrics`` to one cell; False where it was stored without predictions."""
    cell = store.cell(cell_hash)
    sha256 = cell["predictions_sha256"].iat[0]
    if not sha256:
        return False
    added = []
    for fold in store.predictions(cell_hash, sha256):
        template = cell[cell["fold"] == fold.fold].iloc[0]
        for metric, value in fold.scores(metrics).items():
            added.append({**template[COLUMNS].to_dict(), "metric": metric, "value": value})
    kept = cell[~cell["metric"].isin(metrics)]
    rows = pd.concat([kept[COLUMNS], pd.DataFrame(added)[COLUMNS]])
    # The config first, then the rows that name its checksum: each write is whole, and
    # the rows are the cell (a run stopped between them leaves a cell verify names).
    config = store.config(cell_hash)
    config["rescored"] = {**(config.get("rescored") or {}), **metrics}
    digest = store.write_config(cell_hash, dump_yaml(config))
    store.replace_rows(cell_hash, rows, stored_at=cell["stored_at"].iat[0], config_sha256=digest)
    return True
