"""When has a run converged? A test on its per-epoch history, the same for the page, the command and the study.

Two consecutive windows of at least ``WINDOW_STEPS`` steps each (whole epochs, counted back from an epoch's
end) are compared:

- the train ELBO's mean moved by at most ``ELBO_SE`` standard errors of the difference (flat within its
  minibatch noise; each window's standard error is its steps' standard deviation over √steps; at 3 a flat run
  fails a check by chance 0.3 % of the time);
- the geometric mean of σ (the mean of log σ, read at each window's end) moved by at most ``LOG_SD_CHANGE``
  (1 %).

The test is made at the last epoch and at epochs a window apart before it (checks that share no steps). A run
is converged at epoch N when the checks pass at N and at every later check; a run whose last check fails has
not converged, and the result says by how much.
"""

from __future__ import annotations

import math

WINDOW_STEPS = 500
ELBO_SE = 3.0
LOG_SD_CHANGE = 0.01


def pooled(entries: list[dict]) -> tuple[int, float, float]:
    """(steps, mean, standard deviation) of the train ELBO over the steps of ``entries`` together, from each
    entry's step count, mean and standard deviation."""
    steps = sum(entry["steps"] for entry in entries)
    mean = sum(entry["steps"] * entry["train_elbo"] for entry in entries) / steps
    square = sum(entry["steps"] * (entry["train_elbo_sd"] ** 2 + entry["train_elbo"] ** 2) for entry in entries) / steps
    return steps, mean, math.sqrt(max(square - mean**2, 0.0))


def _window(history: list[dict], end: int, steps_wanted: int) -> tuple[int, dict] | None:
    """(the index where the window of whole epochs ending before ``end`` starts, its pooled statistics), or
    None when the history before ``end`` has fewer than ``steps_wanted`` steps."""
    steps, start = 0, end
    while steps < steps_wanted:
        start -= 1
        if start < 0:
            return None
        steps += history[start]["steps"]
    steps, mean, sd = pooled(history[start:end])
    return start, {"mean": mean, "se": sd / math.sqrt(steps), "log_sd": history[end - 1]["log_sd_mean"]}


def check(history: list[dict], end: int, window_steps: int = WINDOW_STEPS) -> dict | None:
    """The test at the end of epoch index ``end - 1`` (None when two windows do not fit before it)."""
    later = _window(history, end, window_steps)
    if later is None:
        return None
    earlier = _window(history, later[0], window_steps)
    if earlier is None:
        return None
    (_, a), (_, b) = earlier, later
    elbo_change = b["mean"] - a["mean"]
    elbo_se = math.hypot(a["se"], b["se"])
    log_sd_change = b["log_sd"] - a["log_sd"]
    return {
        "elbo_change": elbo_change,
        "elbo_change_se": elbo_se,
        "log_sd_change": log_sd_change,
        "passed": abs(elbo_change) <= ELBO_SE * elbo_se and abs(log_sd_change) <= LOG_SD_CHANGE,
    }


def convergence(history: list[dict], window_steps: int = WINDOW_STEPS) -> dict:
    """``converged`` (bool), ``converged_epoch`` (the first epoch from which every check passed, or None),
    and the last check's ``elbo_change``, ``elbo_change_se``, ``log_sd_change`` (None where the history is too
    short for two windows; histories recorded before the per-step spread was kept give None throughout)."""
    empty = {
        "converged": False,
        "converged_epoch": None,
        "elbo_change": None,
        "elbo_change_se": None,
        "log_sd_change": None,
    }
    if not history or any(entry.get("train_elbo_sd") is None or entry.get("log_sd_mean") is None for entry in history):
        return empty
    checks = []  # (the index of the check's last epoch, its result), the last epoch's first
    end = len(history)
    while (result := check(history, end, window_steps)) is not None:
        checks.append((end - 1, result))
        window = _window(history, end, window_steps)
        assert window is not None  # the check above found it
        end = window[0]
    if not checks:
        return empty
    last = checks[0][1]
    passing = 0
    while passing < len(checks) and checks[passing][1]["passed"]:
        passing += 1
    converged = last["passed"]
    return {
        "converged": converged,
        "converged_epoch": history[checks[passing - 1][0]]["epoch"] if converged else None,
        **{key: last[key] for key in ("elbo_change", "elbo_change_se", "log_sd_change")},
    }


def describe(result: dict) -> str:
    """The verdict in words, for tables and pages."""
    if result["converged"]:
        return f"converged at epoch {result['converged_epoch']}"
    if result["elbo_change"] is None:
        return "too short to tell"
    reasons = []
    if abs(result["elbo_change"]) > ELBO_SE * result["elbo_change_se"]:
        reasons.append(f"ELBO moved {result['elbo_change']:+.3g} (± {result['elbo_change_se']:.2g})")
    if abs(result["log_sd_change"]) > LOG_SD_CHANGE:
        reasons.append(f"σ moved {100 * math.expm1(result['log_sd_change']):+.1f} %")
    return "not converged: " + ", ".join(reasons)
