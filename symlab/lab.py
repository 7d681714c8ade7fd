"""What the app, the command line and the tests need to know of a lab: one :class:`Lab` per lab
package, listed in :data:`symlab.labs.LABS`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


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
    # warm(hosting) -> the symlab.jobs.Tasks its page's default link computes, which a starting server
    # begins at once (serve.py) so that the first visitor finds them done or under way.
    warm: Callable | None = None

    def __post_init__(self):
        if not self.page:
            object.__setattr__(self, "page", f"pages/{self.name}.py")
