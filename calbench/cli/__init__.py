"""The ``calbench`` command: ``run`` (a Hydra app) and one module per other command.

``calbench run [OVERRIDES] [-m]`` hands everything after ``run`` to Hydra, so overrides,
``-m`` sweeps, ``--help``, ``--cfg job`` and Hydra's errors for unknown names behave as
Hydra users expect. User errors print one line and exit with status 2.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
import warnings

from calbench.errors import CalbenchError, file_fault

USAGE = """usage: calbench COMMAND [ARGS]

commands:
  run [OVERRIDES] [-m]   fit and evaluate a calibrator (Hydra app; `calbench run --help`)
                         e.g. calbench run method=dir_odir dataset=npz dataset.path=scores.npz
                              calbench run -m method=ts,vs,dir
                              calbench run experiment=valk_synthetic
  tables [OPTIONS]       write ranked tables from the results store (`calbench tables -h`)
  figures [OPTIONS]      simplex maps, reliability and CD diagrams (`calbench figures -h`)
  rescore [OPTIONS]      new metrics on stored cells, no refit (`calbench rescore -h`)
  report EXPERIMENT      one Markdown page with the experiment's tables and figures
  leaderboard EXPERIMENT win rates, Bradley-Terry strengths and paired wins over its tasks
  claims EXPERIMENT      the papers' headline claims checked on each task: holds/fails/undecided
  reproduce PRESET       run a paper preset on the data present; published vs calbench report
  import calarena DIR    a benchmark's published per-task results as experiments of the store
  metric-truth           every calibration-error estimator against the known truth
  data list|fetch|verify the papers' data sets: what is present, download, checksums
       example|has|present|tasks  the tour's two models; whether sets or a preset's are
                         here; an HDF5 file's tasks as one sweep value (`calbench data -h`)
  store verify [--repair] every stored file checked; damaged cells moved aside to recompute
  list KIND [--json]     methods, calibrators, metrics, presets, datasets or tables
"""


#: The commands besides ``run``: name -> module under calbench.cli (each has ``main(argv)``).
COMMANDS = {
    "tables": "tables",
    "figures": "figures",
    "rescore": "rescore",
    "data": "data",
    "store": "store",
    "reproduce": "reproduce",
    "report": "report",
    "leaderboard": "leaderboard",
    "claims": "claims",
    "import": "import_results",  # not cli/import.py: a keyword
    "list": "listing",
    "metric-truth": "metric_truth",  # not cli/list.py: the package attribute would hide the builtin
}


def one_line_warnings():
    """Warnings as one line each, as calbench's errors are: Python's own form adds the
    warning's file and line and the source line after it ("return build("), which name
    calbench's code, not what the user did. Returns the form it replaced."""
    replaced = warnings.formatwarning

    def line(message, category, filename, lineno, source=None):  # noqa: ARG001
        own = f"{os.sep}calbench{os.sep}" in filename
        return f"calbench: warning: {message}\n" if own else f"{category.__name__}: {message}\n"

    warnings.formatwarning = line
    return replaced


def fail(message: str) -> None:
    print(f"calbench: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def run_and_store_cell(config, experiment_choice: str | None) -> dict:
    """One cell of ``calbench run``, planned, run and stored unless it is stored already
    (`calbench.runner.cell.run_cell` computes a plan's rows alone): ``config`` is Hydra's
    composed config (or the plain resolved one calbench's launcher composes,
    `hydra_plugins.calbench_launcher.sweep_composer`), and ``experiment_choice`` the
    ``experiment=`` it was given. Returns what the sweep's progress line reads."""
    from calbench.runner.checks import check_experiment_choice
    from calbench.runner.job import found_stored, run_job
    from calbench.runner.plan import plan_cell

    one_line_warnings()  # (in a sweep's worker process too)
    check_experiment_choice(experiment_choice)
    plan = plan_cell(config)
    stored_before = found_stored(plan)
    return {"cell": run_job(plan), "stored_before": stored_before}


def _single_cell(run) -> dict:
    """``calbench run`` without ``-m``: its cell, any error one line (SystemExit passes
    through Hydra's error reporting). A sweep's launcher reports its cells' errors itself
    (`hydra_plugins.calbench_launcher`)."""
    try:
        return run()
    except CalbenchError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(str(file_fault(exc)))
    except Exception as exc:
        if os.environ.get("CALBENCH_TRACEBACK"):
            raise
        fail(
            f"{type(exc).__name__}: {exc}\n(raised inside the cell's calibrator or metric; "
            "CALBENCH_TRACEBACK=1 shows where)"
        )


def check_results_dir(argv: list[str]) -> None:
    """``results_dir=`` checked before Hydra writes its logs under it: Hydra's own failure
    is a traceback, and an empty value puts its logs in /hydra at the filesystem root."""
    from pathlib import Path

    from calbench.cli.options import RESULTS_DIR, results_dir_of

    value = results_dir_of(argv)
    if "${" in value or ("," in value and "-m" in argv):
        return  # an interpolation or a sweep over folders: Hydra resolves it
    if not value.strip():
        fail(
            "results_dir is empty: Hydra would write its logs to /hydra at the filesystem root. "
            f"Give a folder, e.g. results_dir={RESULTS_DIR}."
        )
    existing = Path(value).expanduser().absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        fail(f"results_dir={value}: {existing} is a file, not a folder; choose another folder.")
    if not os.access(existing, os.W_OK):
        fail(f"results_dir={value}: {existing} is not writable; choose a writable folder.")


#: Config groups whose options `calbench list KIND` lists (the others are listed inline).
LISTED = {"method": "methods", "dataset": "datasets"}


def check_group_choices(argv: list[str]) -> None:
    """``GROUP=NAME`` overrides checked before Hydra composes: a name that is no option of
    its group gets one line with the nearest option, not Hydra's list of all of them; and
    ``dataset.path`` without a data set that reads a file says which to add."""
    from calbench.conf_files import group_files, override_values
    from calbench.errors import nearest

    groups = {"method", "dataset", "criterion", "loss", "shift", "protocol", "metrics"}
    keys = {}
    for arg in argv:
        key, values = override_values(arg)
        keys[key] = values
        if key not in groups or values is None:
            continue
        options = group_files(key)
        for value in values:
            if value not in options:
                where = (
                    f"`calbench list {LISTED[key]}` lists them"
                    if key in LISTED
                    else f"they are: {', '.join(options)}"
                )
                fail(f"{key}={value} names no {key}{nearest(value, options)}; {where}.")
    if "dataset" not in keys and "experiment" not in keys:
        from calbench.conf_files import root_config
        from calbench.yaml_text import load_yaml

        default = next(d["dataset"] for d in root_config()["defaults"] if "dataset" in d)
        known = load_yaml(group_files("dataset")[default].read_text()) or {}
        given = [k for k in keys if k and k.startswith("dataset.") and k[8:] not in known]
        if given and given[0][8:] in {"path", "path_cal", "path_test", "task", "keys"}:
            fail(
                f"{given[0]} is set but no data set that reads a file is chosen: add dataset=npz "
                "(your own scores; or kull_pickle, torch_pair, hdf5), e.g. calbench run "
                "dataset=npz dataset.path=scores.npz."
            )


#: Config groups whose options' keys are known before Hydra composes (`check_override_keys`).
KEYED_GROUPS = ("dataset", "method", "criterion", "loss", "shift", "protocol")


def check_override_keys(argv: list[str]) -> None:
    """``KEY=VALUE`` overrides whose key nothing reads (``mehtod=ts``, ``dataset.pth=x``)
    as one line with the nearest key, before Hydra answers with seven lines advising
    ``+KEY``, which would add a key that nothing reads."""
    from calbench.conf_files import parses, read_group
    from calbench.errors import nearest
    from calbench.runner.checks import run_keys

    for arg in argv:
        if not arg.startswith("-") and "=" in arg and not parses(arg):
            fail(
                f"{arg!r} is no override calbench can read (Hydra's grammar): quote a value "
                "with spaces or any of ()[]{}<>'\",:=| in it, e.g. method.name='my name'."
            )
        if arg.startswith(("+", "~", "-")) or "=" not in arg:
            continue
        key = arg.split("=", 1)[0]
        head, _, rest = key.partition(".")
        if head.split("/")[0] == "hydra":  # Hydra's own settings and groups
            continue
        keys = [k for k in dict.fromkeys(run_keys()) if " " not in k and k != "hydra"]
        if head not in run_keys():
            fail(
                f"unknown config key {head}{nearest(head, keys)}: nothing reads it. "
                f"The keys are: {', '.join(keys)}."
            )
        if rest and head in KEYED_GROUPS:
            sub = rest.split(".")[0]
            known = sorted({k for o in read_group(head).values() for k in o} - {"defaults"})
            if sub not in known:
                hint = nearest(f"{head}.{sub}", [f"{head}.{k}" for k in known])
                fail(
                    f"unknown config key {head}.{sub}{hint}: no {head} option "
                    f"reads it. The keys of {head} options are: {', '.join(known)}."
                )
            _check_nested_key(argv, arg, head, rest)


def _check_nested_key(argv: list[str], arg: str, head: str, rest: str) -> None:
    """``method.params.weight=0.5`` where the chosen method sets no ``weight``: Hydra
    refuses to set a key its config lacks with six lines; one line says to add it with
    ``+`` (a preset, which may choose the option, is left to Hydra)."""
    from calbench.conf_files import override_values, read_group, root_config
    from calbench.errors import nearest

    parts = rest.split(".")
    if len(parts) < 2:
        return
    chosen, given = None, False
    for other in argv:
        key, values = override_values(other)
        if key == "experiment":
            return
        if key == head:
            chosen, given = values, True
    if given and chosen is None:
        return  # a value Hydra reads later (an interpolation): Hydra's own check then
    if chosen is None:
        chosen = [next(d[head] for d in root_config()["defaults"] if head in d)]
    options = read_group(head)
    for option in chosen:
        node = options.get(option)
        if node is None or "defaults" in node:
            return  # a name Hydra's own check names; an option that inherits its keys
        for depth, part in enumerate(parts):
            if not isinstance(node, dict) or part not in node:
                where = ".".join([head, *parts[:depth]]) + "."
                known = [where + k for k in node] if isinstance(node, dict) else []
                fail(
                    f"{head} {option!r} sets no {where}{part}"
                    f"{nearest(where + part, known)}: to add it, write +{arg}"
                )
            node = node[part]


def _run(argv: list[str]) -> None:
    import hydra
    from omegaconf import DictConfig

    check_results_dir(argv)
    check_group_choices(argv)
    check_override_keys(argv)

    def app(cfg: DictConfig) -> dict:
        """One cell, as Hydra runs it (`run_and_store_cell`)."""
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hydra_config = HydraConfig.get()
        choice = hydra_config.runtime.choices.get("experiment")
        if hydra_config.mode == RunMode.MULTIRUN:  # the launcher records each failure
            return run_and_store_cell(cfg, choice)
        return _single_cell(lambda: run_and_store_cell(cfg, choice))

    # calbench's launcher runs the cells it composed itself through this, not through app.
    app.calbench_cell = run_and_store_cell
    sys.argv = ["calbench run", *argv]
    hydra.main(version_base="1.3", config_path="pkg://calbench.conf", config_name="config")(app)()


def _interrupted(argv: list[str], started: float) -> None:
    """Ctrl-C during ``run``: one line saying what is safe (cells are stored atomically)."""
    from pathlib import Path

    from calbench.cli.options import results_dir_of

    store = Path(results_dir_of(argv)) / "store"
    done = (
        [p for p in store.glob("*.csv") if p.stat().st_mtime >= started] if store.is_dir() else []
    )
    print(
        f"\ninterrupted: {len(done)} cell(s) stored in {store} by this run; rerun the same "
        "command to resume (stored cells are skipped).",
        file=sys.stderr,
    )
    raise SystemExit(130)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return
    command, rest = argv[0], argv[1:]
    python_form = one_line_warnings()
    try:
        if command == "run":
            started = time.time()
            try:
                _run(rest)
            except KeyboardInterrupt:
                _interrupted(rest, started)
        elif command in COMMANDS:
            # Each command's module is imported only when it runs (start-up time).
            importlib.import_module(f"calbench.cli.{COMMANDS[command]}").main(rest)
        else:
            fail(f"unknown command {command!r}.\n{USAGE}")
    except CalbenchError as exc:
        fail(str(exc))
    except OSError as exc:  # a full disk, a file where a folder belongs: the folder's fault
        fail(str(file_fault(exc)))
    finally:  # (a program or test that calls main keeps its own form afterwards)
        warnings.formatwarning = python_form


if __name__ == "__main__":
    main()
