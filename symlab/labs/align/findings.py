"""The alignment lab's finding: the loss barrier between two posteriors, before and after alignment."""

from symlab.specs.findings import Finding

from .config import AlignConfig

COMMAND = "symlab align --json"


def numbers(shipped) -> dict:
    """From the default link's shipped result (``shipped(task)``)."""
    from .experiment import alignment_task  # torch: only when the numbers are measured, not to read the words

    _, report = shipped(alignment_task(AlignConfig()))
    return {"align_barrier_before": report.barrier_before, "align_barrier_after": report.barrier_after}


def findings(v: dict) -> list[Finding]:
    return [
        Finding(
            "align",
            "Two posteriors from different seeds are one mode, permuted.",
            f"Aligning their hidden units removes the loss barrier between them ({v['align_barrier_before']:.3f} "
            f"nats before, {v['align_barrier_after']:.3f} after, on half moons).",
            COMMAND,
        )
    ]
