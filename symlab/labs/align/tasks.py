"""What the alignment page computes for a link's values, as shared tasks (the trained pair, the player's first
maps): a starting server begins the default link's (serve.py) and the presets' in idle time. Apart from
:mod:`.params` so that reading a link loads no torch."""

from symlab.specs import surfaces
from symlab.specs.tasks import Task

from .experiment import alignment_task, path_map_task, plane_task, player_start
from .params import MAP_PATHS, page_config


def page_tasks(values: dict) -> list[Task]:
    """The shared computations the page runs for the controls' ``values``: the trained pair, the
    predictive maps the player shows first (moons), and the loss landscape where the 3-D view is on."""
    if values["source"] != "trained":
        return []  # files of one's own: nothing shared
    config = page_config(values)
    maps = [path_map_task(config, path, player_start(config)) for path in MAP_PATHS] if config.task == "moons" else []
    landscape = [plane_task(config)] if values[surfaces.VIEW.name] else []
    return [alignment_task(config), *maps, *landscape]
