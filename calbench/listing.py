"""``calbench list methods|calibrators|metrics|presets|datasets|tables [--json]``: what
calbench knows, one line each. Descriptions come from where each thing is defined (the config file's
leading comment, the metric function's docstring, the table's title), so they cannot drift.
"""

from __future__ import annotations

import inspect
import re

from calbench.calibrators.methods import method_configs
from calbench.calibrators.registry import CALIBRATORS, family, imported_calibrator
from calbench.conf_files import group_files
from calbench.errors import CalbenchError, nearest, unknown_name
from calbench.metrics import METRICS

#: What ``calbench list`` lists.
KINDS = ("methods", "calibrators", "metrics", "presets", "datasets", "tables")


#: A full stop that ends no sentence: "et al.", "Fig.", "e.g." and the like.
_NOT_AN_END = re.compile(r"(?:\bal|\bFigs?|\be\.g|\bi\.e|\b[Ee]qs?|\b[Ss]ec|\bvs|\bcf)\.$")


def _first_sentence(text: str, limit: int = 110) -> str:
    text = " ".join(text.split())
    stops = re.finditer(r"\.\s", text)
    ends = (m.end() for m in stops if not _NOT_AN_END.search(text[: m.start() + 1]))
    end = next(ends, None)
    sentence = text if end is None else text[: end - 1]
    return sentence if len(sentence) <= limit else sentence[: limit - 3].rstrip() + "..."


def _leading_comment(entry) -> str:
    """The comment a config file opens with (Hydra's ``@package`` line aside)."""
    lines = []
    for line in entry.read_text().splitlines():
        if not line.startswith("#"):
            break
        if not line.startswith("# @package"):
            lines.append(line.lstrip("#").strip())
    return _first_sentence(" ".join(lines))


def _calibrator_class(calibrator: str):
    """The class a method's ``calibrator`` names: registered, or a user's ``module:Class``
    (imported as a run imports it); None for a composition."""
    if calibrator == "compose":
        return None
    if ":" in calibrator:
        return imported_calibrator(calibrator)
    return CALIBRATORS[calibrator][0]


def _methods() -> list[dict]:
    files = group_files("method")
    out = []
    for name, config in method_configs().items():
        calibrator = config["calibrator"]
        try:
            cls = _calibrator_class(calibrator)
        except (CalbenchError, KeyError) as exc:  # one file's mistake, named with its file
            reason = (
                f"calibrator: {calibrator} names no registered calibrator"
                f"{nearest(calibrator, CALIBRATORS)} (module:Class for your own)"
                if isinstance(exc, KeyError)
                else str(exc)
            )
            raise CalbenchError(f"{files[name]}: {reason}") from None
        out.append(
            {
                "name": name,
                "family": "composition" if cls is None else family(cls),
                "calibrator": calibrator,
                "input": "logits" if cls is None else cls.input_kind,
                "searched": _searched(config),
                "description": _leading_comment(files[name]),
            }
        )
    return out


def _searched(config: dict) -> str:
    """The grid's keys; a method its authors tuned per data set says so (it runs on those
    data sets only, and its refusal elsewhere names them; the listing said "-")."""
    tuned = list(config.get("tuned") or {})
    if tuned:
        return f"tuned: {len(tuned)} data sets only"
    return ", ".join(config.get("grid") or {}) or "-"


def _calibrators() -> list[dict]:
    """The registered names ``make_calibrator`` takes, with what each fixes and how its
    defaults set the penalties (what a method config does not search is set so)."""
    out = []
    for name, (cls, fixed) in CALIBRATORS.items():
        doc = inspect.getdoc(cls) or ""
        out.append(
            {
                "name": name,
                "class": cls.__name__,
                "input": cls.input_kind,
                "fixes": ", ".join(f"{k}={v}" for k, v in fixed.items()) or "-",
                "default strengths": cls(**fixed).default_strengths(),
                "description": _first_sentence(doc),
            }
        )
    return out


def _metrics() -> list[dict]:
    return [
        {
            "name": name,
            "needs": spec.needs,
            "better": "higher" if spec.higher_is_better else "lower",
            "description": _first_sentence(inspect.getdoc(spec.function) or ""),
        }
        for name, spec in sorted(METRICS.items())
    ]


def _configs(group: str) -> list[dict]:
    return [
        {"name": name, "description": _leading_comment(entry)}
        for name, entry in group_files(group).items()
    ]


def _tables() -> list[dict]:
    from calbench.tables.write import table_specs  # the tables room, only for this kind

    return [
        {
            "name": name,
            "experiment": spec["experiment"],
            "layout": spec["layout"],
            "description": _first_sentence(spec.get("title", "")),
        }
        for name, spec in table_specs().items()
    ]


def catalogue(kind: str) -> list[dict]:
    """The records ``calbench list KIND`` prints, one per name."""
    listers = {
        "methods": _methods,
        "calibrators": _calibrators,
        "metrics": _metrics,
        "presets": lambda: _configs("experiment"),
        "datasets": lambda: _configs("dataset"),
        "tables": _tables,
    }
    if kind not in listers:
        raise unknown_name("list", kind, KINDS)
    return listers[kind]()


__all__ = ["KINDS", "catalogue"]
