"""What the symmetry explorer computes for a link's values, as shared tasks (its part's): a starting server begins
the default link's (serve.py) and the presets' in idle time. Apart from :mod:`.params` so that reading a link loads
no torch."""

from symlab.specs.tasks import Task

from .experiment import mlps_task, perceptron_task, proximity_task, quality_task
from .params import page_configs


def page_tasks(values: dict) -> list[Task]:
    """The shared computations the page runs for the controls' ``values``: its part's."""
    configs = page_configs(values)
    part = values["part"]
    if part == "fig1":
        return [perceptron_task(configs["perceptron"])]
    if part == "mass":
        return [perceptron_task(configs["perceptron"]), mlps_task(configs["mlp"])]
    if part == "proximity":
        return [proximity_task(configs["proximity"])]
    if part == "quality":
        return [quality_task(configs["quality"])]
    if part == "training":
        return [mlps_task(configs["mlp"])]
    return []  # a file of one's own: nothing shared
