"""The alignment page's URL parameters."""

from symlab.urlstate import Param

from . import experiment as align_lab

DEFAULT = align_lab.AlignConfig()
ORDERS = {"own": "in its own order", "aligned": "in the aligned order"}


def page_params(hosting=None) -> tuple[Param, ...]:
    return (
        Param("task", "choice", DEFAULT.task, choices=align_lab.TASKS),
        Param("width", "int", DEFAULT.width, 2, 128),
        Param("depth", "int", DEFAULT.depth, 1, 3),
        Param("train", "int", DEFAULT.train_size, 50, 20_000),
        Param("noise", "float", DEFAULT.noise, 0.0, 0.5, step=0.05),
        Param("steps", "int", DEFAULT.steps, 100, 3000),
        Param("lr", "float", DEFAULT.lr, 0.001, 0.05, step=0.001),
        Param("prior", "float", DEFAULT.prior_scale, 0.1, 3.0, step=0.1),
        Param("samples", "int", DEFAULT.samples, 4, 64),
        Param("order", "choice", "own", choices=tuple(ORDERS)),
        Param("seed", "int", 0, 0, 100_000),
    )
