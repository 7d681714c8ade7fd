"""What the alignment page computes for a link's values, as shared tasks (the trained pair, the player's
maps): a starting server begins the default link's (serve.py) and the presets' in idle time. Apart from
:mod:`.params` so that reading a link loads no torch."""

from symlab.specs.tasks import Task
from symlab.specs.urlstate import SURFACE_VIEW

from .experiment import alignment_task, path_maps_task, plane_task
from .params import page_config


def page_tasks(values: dict) -> list[Task]:
    """The shared computations the page runs for the controls' ``values``: the trained pair, the
    predictive maps along the paths the player plays (moons), and the loss landscape where the 3-D view is on."""
    if values["source"] != "trained":
        return []  # files of one's own: nothing shared
    config = page_config(values)
    maps = [path_maps_task(config)] if config.task == "moons" else []
    landscape = [plane_task(config)] if values[SURFACE_VIEW.name] else []
    return [alignment_task(config), *maps, *landscape]
