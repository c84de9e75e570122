"""What SMS's fit needs in memory on each of its two paths beyond Newton's class limit
(scipy's L-BFGS-B, the lean path `fit_multinomial_lean`), and which one a fit takes: so
that a fit too large for the machine is refused before any work, and a shape's path does
not depend on the machine where both fit (`check_sms_memory`)."""

from __future__ import annotations

from calbench.calibrators.solvers.lbfgs import LBFGS_COPIES
from calbench.calibrators.solvers.lean_lbfgs import LEAN_CORRECTIONS
from calbench.calibrators.solvers.memory import available_memory
from calbench.calibrators.solvers.multinomial_lean import LEAN_CHUNK_ENTRIES
from calbench.calibrators.solvers.newton_vector_lean import LEAN_ENTRIES
from calbench.errors import CalbenchError

#: Copies of SMS's k (k + 1) parameters at its fit's peak: L-BFGS-B's workspace and about
#: ten of the fit's own; and of the n x k features (the log-probabilities, with a column of
#: ones, the logits, the probabilities and the preconditioner's weights). Measured peaks of
#: the whole process, its logits included: 12.6 GB at 5,000 classes x 25,000 rows (this
#: count says 17 GB), 6.4 GB at 2,000 x 50,000 (6.6 GB).
SMS_PARAMETER_COPIES = LBFGS_COPIES + 10
SMS_FEATURE_COPIES = 6
#: The same for the lean path (`fit_multinomial_lean`): float64 copies of the parameters
#: (the point, its gradient, the direction, a trial point with its weights and gradient,
#: the preconditioner's two factors, the maps' temporaries, and `LEAN_CORRECTIONS` float32
#: pairs), and of the features (the caller's logits, the packed features and, while they
#: are built, the unpacked ones; two in the fit); plus the chunks' buffers (at most 5).
LEAN_SMS_PARAMETER_COPIES = 8 + LEAN_CORRECTIONS
LEAN_SMS_FEATURE_COPIES = 3
LEAN_SMS_BUFFERS = 5


def sms_memory_needs(n: int, k: int) -> tuple[int, int]:
    """Bytes SMS's fit needs beyond Newton's class limit: ``(scipy's path, the lean path)``."""
    copy, features = 8 * k * (k + 1), 8 * n * k
    full = SMS_PARAMETER_COPIES * copy + SMS_FEATURE_COPIES * features
    # the features' copies while they are built, or two of them beside the fit's own
    lean = max(LEAN_SMS_FEATURE_COPIES * features, 2 * features + LEAN_SMS_PARAMETER_COPIES * copy)
    buffers = LEAN_SMS_BUFFERS * 8 * min(LEAN_CHUNK_ENTRIES, n * (k + 1))
    return full, lean + buffers


#: Classes above which ``lean="auto"`` takes the lean path whatever the memory: it is
#: then leaner and no slower (25,000 rows, 2 loaded cores: 2,000 classes 1,821 MB in
#: 100 s against scipy's path's 2,857 MB in 140 s; 5,000 classes 4,921 MB in 396 s against
#: 9,697 MB in 455 s and probmetrics' 7,287 MB in 495 s), and a shape's path must not
#: depend on the machine's free memory ...
LEAN_ABOVE_CLASSES = 1000
#: ... and the features (n k) from which it does so at any class count beyond Newton's
#: limit, where it is faster (measured; at these sizes one chunk holds all the rows, so
#: the gain is its L-BFGS and its class-pair start, not the chunks) (2026-11-29, 2 idle
#: cores, best of 2: 25,000 x 1,000 11.5 s against 15.1 s and probmetrics' 17.0 to
#: 17.3 s, peak 1,206 MB against 1,449 and 1,492; 25,000 x 200 1.5 s against 1.8 to 2.0;
#: 50,000 x 100 1.5 against 1.7 to 1.8; 5,000 x 1,000 2.0 to 2.1 against 2.8 to 3.3;
#: 10,000 x 500 1.9 to 2.0 against 2.0 to 2.1), while at 5,000 x 100 (5e5) it is the
#: slower (0.23 to 0.28 s against 0.22). The same bound as `newton_vector`'s row chunks.
LEAN_FROM_ENTRIES = LEAN_ENTRIES


def check_sms_memory(
    n: int, k: int, lean: str = "auto", can_lean: bool = True, precision: str = "float64"
) -> bool:
    """Whether SMS takes the lean path (`fit_multinomial_lean`): where asked (``lean``
    "always"), or ("auto") above `LEAN_ABOVE_CLASSES` classes or from `LEAN_FROM_ENTRIES`
    features in float64 (the lean path has no float32 products) or where scipy's path
    would not fit in the memory available and the lean one does (``can_lean``: the
    log-loss on the CPU). Refuses before any work where neither fits (at 10,000 classes
    scipy asked for 33.5 GiB of workspace after 153 s of work and failed)."""
    if lean == "always" and can_lean:
        return True
    large = k > LEAN_ABOVE_CLASSES or n * k >= LEAN_FROM_ENTRIES
    if lean == "auto" and can_lean and large and precision == "float64":
        _, lean_need = sms_memory_needs(n, k)
        available = available_memory()
        if available is None or lean_need <= available:
            return True
    full, lean_need = sms_memory_needs(n, k)
    available = available_memory()
    if available is None or full <= available:
        return False
    if lean == "auto" and can_lean and lean_need <= available:
        return True
    copy = 8 * k * (k + 1)
    raise CalbenchError(
        f"StructuredScaling (sms): a full {k} x {k} map on {n} rows needs about "
        f"{full / 1e9:.0f} GB ({copy / 1e9:.1f} GB a copy of its {k * (k + 1):,} parameters, "
        f"{SMS_PARAMETER_COPIES} copies with L-BFGS-B's workspace, and "
        f"{SMS_FEATURE_COPIES} copies of the {n} x {k} features), its lean path (the "
        f"log-loss on the CPU) about {lean_need / 1e9:.0f} GB, and this machine has "
        f"{available / 1e9:.0f} GB available. Fit it where there is more memory, or use a "
        "map with a few parameters a class: svs, vs, ets or ts."
    )
