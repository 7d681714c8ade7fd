"""The mode-interpolation lab's finding: the threshold where reverse KL stops interpolating."""

from symlab.specs.findings import Finding

from .experiment import exact_threshold

COMMAND = "symlab modes --json"


def numbers(shipped) -> dict:
    """``shipped`` (a task's shipped result) is not needed: the threshold is solved here, in milliseconds."""
    return {"alpha_star": exact_threshold(1.0)}


def findings(v: dict) -> list[Finding]:
    return [
        Finding(
            "modes",
            "Reverse KL interpolates, then jumps.",
            f"A single Gaussian fitted to two equal modes sits *between* them while they are less than "
            f"α* ≈ {v['alpha_star']:.2f}σ apart, and on one of them beyond; the KL then tends to ln 2.",
            COMMAND,
        )
    ]
