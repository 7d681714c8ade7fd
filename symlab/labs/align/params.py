"""The alignment page's URL parameters: the declared controls of :class:`AlignConfig` it shows, and its view."""

from symlab import controls, jobs
from symlab.urlstate import Param, parse_query

from .experiment import AlignConfig, alignment_task, path_map_task, player_start

# The settings the page shows (the command line has all of AlignConfig's), in the sidebar's order.
FIELDS = ("task", "width", "depth", "train_size", "noise", "steps", "lr", "prior_scale", "samples")
# The shared server trains and aligns while a visitor waits, and keeps each link's data and posteriors in
# memory: the page stays below the declared ranges (the widgets' help says so); the command line does not.
CAPS = {"width": 128, "train_size": 20_000, "steps": 3000, "samples": 64}
ORDERS = {"own": "in its own order", "aligned": "in the aligned order"}
MAP_PATHS = ("before", "w2")  # the player's maps: unaligned, and after W₂ alignment
ORDER = Param("order", "choice", "own", choices=tuple(ORDERS))  # a view of the assignments, not a setting
SOURCES = {"trained": "trained here", "files": "your files"}
SOURCE = Param("source", "choice", "trained", choices=tuple(SOURCES))  # the pair: trained by the page, or uploaded


def page_params(hosting=None) -> tuple[Param, ...]:
    return (SOURCE, *controls.url_params(AlignConfig, FIELDS, caps=CAPS), ORDER,
            *controls.url_params(AlignConfig, ["seed"]))


def page_config(values: dict) -> AlignConfig:
    """The page's config from its controls' values (the URL's, or the widgets')."""
    return AlignConfig(**controls.config_values(AlignConfig, values, (*FIELDS, "seed"))).validate()


def warm_tasks(hosting=None) -> list[jobs.Task]:
    """What the page's default link computes, for the server to start on as it starts: the trained pair and
    the predictive maps the player shows first."""
    config = page_config(parse_query({}, page_params(hosting))[0])
    maps = [path_map_task(config, path, player_start(config)) for path in MAP_PATHS] if config.task == "moons" else []
    return [alignment_task(config), *maps]
