"""What the app, the command line and the tests need to know of a lab: one :class:`Lab` per lab
package, listed in :data:`symlab.labs.LABS`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable

from symlab.urlstate import parse_query


@dataclass(frozen=True)
class Lab:
    name: str  # the page's URL path and the command line's first subcommand
    title: str
    icon: str  # a Material icon, ":material/<name>:"
    register: Callable  # register(subparsers): adds the lab's subcommands, each with run= and format=
    page_params: Callable  # page_params(hosting) -> the page's URL parameters (urlstate.Param), in order
    blurb: str  # one sentence or two for the home page
    page: str = ""  # the page file, relative to app.py; default pages/<name>.py
    # For a lab whose work runs in worker processes (symlab.runs): the module whose ``KIND`` is its
    # runs.RunKind, imported only when one of its runs is read.
    runs: str = ""
    # tasks(values) -> the symlab.jobs.Tasks its page computes for the controls' values (as
    # urlstate.parse_query gives them): a starting server begins the default link's at once (serve.py),
    # and computes the presets' and their neighbours' in idle time (symlab.warmup).
    tasks: Callable | None = None
    # Preset name -> (the controls' values it sets, one sentence on what to watch), for a lab with tasks.
    presets: Mapping[str, tuple[dict, str]] = field(default_factory=dict)

    def default_values(self, hosting=None) -> dict:
        """The controls' values of the page's default link."""
        return parse_query({}, self.page_params(hosting))[0]

    def __post_init__(self):
        if not self.page:
            object.__setattr__(self, "page", f"pages/{self.name}.py")
