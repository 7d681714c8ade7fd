"""What the tractable BNN's page computes for a link's values, as shared tasks: its live run, which a starting
server trains for the presets and their neighbours in idle time. Apart from :mod:`.params` so that reading a link
loads no torch."""

from symlab.specs import controls
from symlab.specs.tasks import Task

from .config import ToyConfig
from .live import live_task
from .params import FIELDS


def page_config(values: dict) -> ToyConfig:
    """The live view's settings from the page's control values."""
    return ToyConfig(**controls.config_values(ToyConfig, values, FIELDS)).validate()


def page_tasks(values: dict) -> list[Task]:
    return [live_task(page_config(values))]
