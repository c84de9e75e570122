"""What each calibrator parameter may be, checked once in ``fit`` (as scikit-learn's
``_parameter_constraints``).

Parameters mean the same thing in every calibrator that has them (``reg_lambda`` is a
penalty weight wherever it appears), so the constraints are declared once, by name;
a class whose parameter means something else overrides its entry in
``Calibrator._parameter_constraints``, where string options are declared with `Choice`
beside the class's other parameters, so that ``fit`` and the run's config check
(`calbench.runner.checks`) reject a bad option before any work.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass


@dataclass(frozen=True)
class Number:
    """A finite real (or, with ``integer``, an int) no smaller than ``low`` (above it if
    ``strict``); booleans are not numbers here, nor are inf and NaN (a penalty of inf
    fitted silently to nothing)."""

    low: float | None = None
    strict: bool = False
    integer: bool = False

    def accepts(self, value) -> bool:
        kind = numbers.Integral if self.integer else numbers.Real
        if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value):
            return False
        if self.low is None:
            return True
        return value > self.low if self.strict else value >= self.low

    def describe(self) -> str:
        kind = "an int" if self.integer else "a finite number"
        if self.low is None:
            return kind
        return f"{kind} {'>' if self.strict else '>='} {self.low:g}"


@dataclass(frozen=True)
class Flag:
    def accepts(self, value) -> bool:
        return isinstance(value, bool)

    def describe(self) -> str:
        return "true or false"


@dataclass(frozen=True)
class AutoOr:
    """The string ``"auto"`` (the calibrator chooses the value from the data) or ``rule``."""

    rule: Number

    def accepts(self, value) -> bool:
        return value == "auto" or self.rule.accepts(value)

    def describe(self) -> str:
        return f'"auto" or {self.rule.describe()}'


@dataclass(frozen=True)
class Choice:
    """One of the listed strings (a class's options, declared with its other parameters)."""

    options: tuple[str, ...]

    def __init__(self, *options: str):
        object.__setattr__(self, "options", options)

    def accepts(self, value) -> bool:
        return isinstance(value, str) and value in self.options

    def describe(self) -> str:
        return "one of " + ", ".join(repr(o) for o in self.options)


@dataclass(frozen=True)
class NoneOr:
    """None (the option is off) or ``rule``."""

    rule: Number

    def accepts(self, value) -> bool:
        return value is None or self.rule.accepts(value)

    def describe(self) -> str:
        return f"None or {self.rule.describe()}"


NON_NEGATIVE = Number(0.0)
POSITIVE = Number(0.0, strict=True)
COUNT = Number(1, integer=True)

#: parameter name -> what it may be, for every calibrator that has the parameter.
CONSTRAINTS = {
    **dict.fromkeys(
        ("alpha", "reg_lambda", "reg_mu", "tie_break", "weight_decay", "noise", "pseudo_count"),
        NON_NEGATIVE,
    ),
    **dict.fromkeys(("bandwidth", "learning_rate", "tol"), POSITIVE),
    **dict.fromkeys(
        (
            "max_iter",
            "n_bins",
            "n_folds",
            "n_neighbors",
            "n_steps",
            "n_transforms",
            "n_trees",
            "search_size",
        ),
        COUNT,
    ),
    "n_knots": Number(2, integer=True),
    "n_decisions": Number(2, integer=True),
    "n_iterations": Number(0, integer=True),
    **dict.fromkeys(("random_state", "seed", "ranks"), Number(0, integer=True)),
    **dict.fromkeys(("penalise_intercept", "reference_class", "warm_start"), Flag()),
    # how the k-NN, kernel, forest and DEC maps keep outputs inside the simplex
    "cropping": Choice("outside", "clip"),
}
