"""The symmetry explorer's finding, and the numbers of its shipped Fig. 1 that the class path states."""

from symlab.specs.findings import Finding

from .config import PerceptronConfig

COMMAND = "symlab symmetry perceptrons --json; symlab symmetry proximity --json"


def numbers(shipped) -> dict:
    """The shipped Fig. 1's peaks, raw and sorted (``shipped(task)``: the default link's stored result)."""
    from .experiment import perceptron_task  # torch: only when the numbers are measured, not to read the words

    _, report = shipped(perceptron_task(PerceptronConfig()))
    return {
        "fig1_raw_peaks": len(report.stages["raw"]["peaks"]),
        "fig1_sorted_peaks": len(report.stages["sorted"]["peaks"]),
    }


def findings(v: dict) -> list[Finding]:
    return [
        Finding(
            "symmetry",
            "Equivalent modes crowd together in wide networks.",
            "A layer's nearest permuted copy gets closer, relative to ‖w‖, as the layer widens, far faster "
            "than the bound 2D / log n! (Thm 3.1), which says nothing until it drops below 2.",
            COMMAND,
        )
    ]
