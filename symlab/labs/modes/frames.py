"""Adam's path, played in the browser: the path from q's start computed once for every session with the same (α, σ),
and encoded as the frames of the page's two charts, q against the target along e₁ and the objective along the way
(:mod:`symlab.specs.animation`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from symlab.specs import animation

from . import experiment as modes

STEPS = 1000  # Adam's steps, as the paper's
FRAME_STRIDE = 10  # Adam steps per frame
DENSITY_POINTS = 400
# The series of the page's charts: the labels its legends show.
DENSITY_LABELS = {"target": "target p_α", "q": "q (reverse KL)"}
KL_LABELS = {"kl": "KL(q‖p_α)", "now": "current step", "ln2": "ln 2"}


@dataclass(frozen=True)
class PathRun:
    """Adam's path (what the page tells of the step a visitor stops on) and its animation."""

    path: modes.OptimisationPath
    animation: animation.Animation

    def step_of(self, frame: int) -> int:
        return min(frame * FRAME_STRIDE, len(self.path) - 1)


def density_grid(alpha: float, sigma: float) -> np.ndarray:
    """Points along e₁ that hold both components and q wherever Adam takes it."""
    return np.linspace(-4 * sigma - 0.5 * alpha, 1.5 * alpha + 4 * sigma, DENSITY_POINTS)


def frame_steps(path: modes.OptimisationPath) -> np.ndarray:
    """The Adam step each frame shows: every :data:`FRAME_STRIDE`-th, the start included."""
    return np.arange(0, len(path), FRAME_STRIDE)


def step_text(path: modes.OptimisationPath, step: int) -> str:
    """The one statement of a frame: its step and q's values there (the player's label)."""
    return (
        f"Adam step {step} / {len(path) - 1}: μ = {path.mean[step]:.3f}, s = {path.std[step]:.3f}, "
        f"KL(q‖p_α) = {path.kl[step]:.4f} nats"
    )


def path_frames(path: modes.OptimisationPath) -> list[animation.Frame]:
    """Each frame's datasets: the target and q along e₁ (``density``), the objective with the step marked (``kl``);
    what does not move is sent once (the encoding leaves out unchanged series)."""
    x = density_grid(path.alpha, path.sigma)
    target = {"x": x, "y": np.exp(modes.log_mixture(x, path.alpha, path.sigma))}
    objective = {"x": np.arange(len(path)), "y": path.kl}
    return [
        {
            "density": {
                "lines": {
                    DENSITY_LABELS["target"]: target,
                    DENSITY_LABELS["q"]: {"x": x, "y": np.exp(modes.log_normal(x, path.mean[s], path.std[s]))},
                }
            },
            "kl": {
                "lines": {KL_LABELS["kl"]: objective, KL_LABELS["now"]: {"x": [s], "y": [path.kl[s]]}},
            },
        }
        for s in frame_steps(path).tolist()
    ]


def path_run(alpha: float, sigma: float) -> PathRun:
    """Adam's path at (α, σ) and its animation, a frame every :data:`FRAME_STRIDE` steps."""
    path = modes.optimisation_path(alpha, sigma, STEPS)
    labels = [step_text(path, s) for s in frame_steps(path).tolist()]
    return PathRun(path, animation.encode(path_frames(path), labels, [""] * len(labels)))
