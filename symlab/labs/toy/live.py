"""Live training, played in the browser: the page's whole run (both methods, every start) trained once for every
session with the same settings, in a worker, recorded a frame every :data:`STEPS_PER_FRAME` Adam steps, and
encoded as the frames of the page's four charts (:mod:`symlab.specs.animation`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from symlab.lib import two_relu
from symlab.specs import animation
from symlab.specs.tasks import Task

from . import experiment as toy
from .config import ToyConfig
from .params import LIVE_STEPS

STEPS_PER_FRAME = 20
FRAMES = LIVE_STEPS // STEPS_PER_FRAME + 1  # frame 0: the initialisation
DISPLAY_GRID = 81  # the page's grid for the exact posterior (the evidence uses 201 points)
# The series of the page's charts, by what they draw: the labels its legends show.
METHOD_LABELS = {"mfvi": "MFVI", "sgm": "SGM (q_G)", "exact": "exact posterior"}
POSTERIOR_LABELS = {
    "mfvi": "MFVI: 1 and 2 sd",
    "sgm": "SGM (q_G): 1 and 2 sd, both components",
    "modes": "equivalent modes (α, −α), (−α, α)",
    "others": "other starts (both methods): 1 sd",
}
PREDICTION_LABELS = {
    "data": "training data",
    "truth": "true α|x|",
    **{method: f"{label}: mean ± 2 sd" for method, label in METHOD_LABELS.items()},
}
# Each method's own lower bound on log p(D): MFVI's ELBO, SGM's ELBO + I.
BOUND_FIELDS = {"mfvi": "elbo", "sgm": "elbo_g"}


@dataclass(frozen=True)
class LiveRun:
    """A live run: its trajectory (what the page tells of the frame a visitor stops on) and its animation."""

    trajectory: two_relu.Trajectory
    animation: animation.Animation


def live_trajectory(config: ToyConfig, progress=None, frames: int = FRAMES) -> two_relu.Trajectory:
    """Every start of MFVI, then every start of SGM, trained together for ``frames`` frames (the whole run:
    :data:`LIVE_STEPS` steps); stops early where every run diverged."""
    trainer = two_relu.ToyTrainer(toy.starts_of("mfvi", config) + toy.starts_of("sgm", config))
    return two_relu.record_trajectory(trainer, frames, STEPS_PER_FRAME, progress)


def frame_fits(config: ToyConfig, snapshot: two_relu.Snapshot, exact: toy.ExactAnswer) -> list[toy.Fit]:
    """MFVI's fit and SGM's at one frame, each kept by its latest recorded bound (ties to the first start)."""
    return toy.fits(snapshot, snapshot.latest_bounds(), {config: exact}, tie=toy.LIVE_BOUND_TIE)


def ellipses(mean, std, symmetrised: bool, radii=(1.0, 2.0), first_part: int = 0) -> dict:
    """One series of the posterior chart: each outline as its centre and half-axes, numbered by ``part``."""
    centres, half_axes = two_relu.gaussian_ellipses(mean, std, symmetrised, radii)
    return {
        "cx": centres[:, 0],
        "cy": centres[:, 1],
        "rx": half_axes[:, 0],
        "ry": half_axes[:, 1],
        "part": np.arange(first_part, first_part + len(centres)),
    }


def posterior_series(config: ToyConfig, snapshot: two_relu.Snapshot, fits: list[toy.Fit]) -> dict:
    """The kept fits' 1 and 2 sd ellipses (both components of SGM's q_G), the other starts' 1 sd ones, the modes."""
    means, stds = snapshot.parameters()
    series = {POSTERIOR_LABELS[f.method]: ellipses(means[f.row], stds[f.row], f.method == "sgm") for f in fits}
    others = [row for fit in fits for row in fit.rows if row != fit.row]
    if others:
        parts = [ellipses(means[row], stds[row], False, (1.0,), first_part=k) for k, row in enumerate(others)]
        series[POSTERIOR_LABELS["others"]] = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
    a = config.alpha
    series[POSTERIOR_LABELS["modes"]] = {"cx": [a, -a], "cy": [-a, a], "rx": [0, 0], "ry": [0, 0], "part": [0, 1]}
    return series


def prediction_series(view, config: ToyConfig, snapshot: two_relu.Snapshot, fits: list[toy.Fit]) -> dict:
    """The data, the true function and each method's predictive mean (``lines``), with its ±2 sd band (``bands``)."""
    data, _, _, x, exact_mean, exact_std = view
    means, stds = snapshot.predictive(x)
    predicted = {"exact": (exact_mean, exact_std), **{f.method: (means[f.row], stds[f.row]) for f in fits}}
    lines = {
        PREDICTION_LABELS["data"]: {"x": data.x_train, "y": data.y_train},
        PREDICTION_LABELS["truth"]: {"x": x, "y": config.alpha * np.abs(x)},
    }
    bands = {}
    for method, (mean, std) in predicted.items():
        lines[PREDICTION_LABELS[method]] = {"x": x, "y": mean}
        bands[PREDICTION_LABELS[method]] = {"x": x, "low": mean - 2 * std, "high": mean + 2 * std}
    return {"lines": lines, "bands": bands}


def curve_series(snapshot: two_relu.Snapshot, fits: list[toy.Fit]) -> dict:
    """The kept starts' histories: their own bounds (``bounds``) and test MSE (``mse``), by Adam step."""
    bounds, mse = {}, {}
    for fit in fits:
        history = snapshot.history[fit.row]
        bounds[METHOD_LABELS[fit.method]] = {"x": history.step, "y": getattr(history, BOUND_FIELDS[fit.method])}
        mse[METHOD_LABELS[fit.method]] = {"x": history.step, "y": history.test_mse}
    return {"bounds": {"lines": bounds}, "mse": {"lines": mse}}


def frame_caption(snapshot: two_relu.Snapshot, fits: list[toy.Fit]) -> str:
    """A frame's numbers in words: each kept fit's bound, test MSE and q."""
    means, stds = snapshot.parameters()
    words = []
    for fit in fits:
        history, (mu, sd) = snapshot.history[fit.row], (means[fit.row], stds[fit.row])
        bound = "ELBO + I" if fit.method == "sgm" else "ELBO"
        words.append(
            f"{METHOD_LABELS[fit.method]}: {bound} {getattr(history, BOUND_FIELDS[fit.method])[-1]:.3f}, "
            f"test MSE {history.test_mse[-1]:.3f}, μ = ({mu[0]:.2f}, {mu[1]:.2f}), s = ({sd[0]:.2f}, {sd[1]:.2f})"
        )
    return " · ".join(words)


def live_animation(config: ToyConfig, trajectory: two_relu.Trajectory, view=None) -> animation.Animation:
    """The page's four charts, frame by frame; ``view``: :func:`toy.exact_view` of ``config`` on
    :data:`DISPLAY_GRID`, where the caller holds it."""
    view = toy.exact_view(config, DISPLAY_GRID) if view is None else view
    exact = view[1]
    frames, labels, captions = [], [], []
    for k in range(len(trajectory)):
        snapshot = trajectory.frame(k)
        fits = frame_fits(config, snapshot, exact)
        frames.append(
            {
                "posterior": {"lines": posterior_series(config, snapshot, fits)},
                "predictions": prediction_series(view, config, snapshot, fits),
                **curve_series(snapshot, fits),
            }
        )
        labels.append(f"Adam step {snapshot.steps_done} / {LIVE_STEPS}")
        captions.append(frame_caption(snapshot, fits))
    return animation.encode(frames, labels, captions)


def live_run(config: ToyConfig, progress=None, frames: int = FRAMES) -> LiveRun:
    """The live run of ``config`` (its first ``frames`` frames: the whole run), trained and encoded;
    ``progress(done, total, text)`` frame by frame."""
    report = None
    if progress is not None:
        report = lambda done, total: progress(done, total, f"Training: Adam step {(done - 1) * STEPS_PER_FRAME}")
    trajectory = live_trajectory(config, report, frames)
    return LiveRun(trajectory, live_animation(config, trajectory))


def live_task(config: ToyConfig) -> Task:
    """:func:`live_run` as a shared task: computed once for every session with these settings."""
    runs = len(two_relu.METHODS) * config.restarts
    return Task(
        ("toy_live", config),
        live_run,
        (config,),
        "Training both methods",
        toy.training_cost(config, runs, LIVE_STEPS, FRAMES),
    )
