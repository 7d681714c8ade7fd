"""The alignment lab's finding: the loss barrier between two posteriors, before and after alignment."""

from symlab.specs.findings import Finding

from .config import NOISE_MULTIPLE, AlignConfig, within_noise

COMMAND = "symlab align --json"


def numbers(shipped) -> dict:
    """From the default link's shipped result (``shipped(task)``)."""
    from .experiment import alignment_task  # torch: only when the numbers are measured, not to read the words

    _, report = shipped(alignment_task(AlignConfig()))
    return {
        "align_barrier_before": report.barrier_before,
        "align_barrier_before_se": report.barrier_before_se,
        "align_barrier_after": report.barrier_after,
        "align_barrier_after_se": report.barrier_after_se,
    }


def findings(v: dict) -> list[Finding]:
    gone = within_noise(v["align_barrier_after"], v["align_barrier_after_se"])
    verb = "removes" if gone else "lowers"
    after = "below" if gone else "above"
    return [
        Finding(
            "align",
            "Two posteriors from different seeds are one mode, permuted.",
            f"Aligning their hidden units {verb} the loss barrier between them ({v['align_barrier_before']:.3f} ± "
            f"{v['align_barrier_before_se']:.3f} nats before, {v['align_barrier_after']:.3f} ± "
            f"{v['align_barrier_after_se']:.3f} after, {after} {NOISE_MULTIPLE} Monte-Carlo standard errors, on "
            "half moons).",
            COMMAND,
        )
    ]
