"""What the app, the command line and the tests need to know of a lab: one :class:`Lab` per lab
package, listed in :data:`symlab.labs.LABS`.

A lab names each of its parts as ``"module:attribute"``, imported when first asked for: listing the labs
imports no lab's computation, and the registry depends on nothing above it (the command line and the
pages, which name the labs' parts, import the labs, never the other way round)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from symlab.specs.presets import Presets
from symlab.specs.urlstate import parse_query


def part(reference: str):
    """The attribute ``"package.module:name"`` names, its module imported."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Lab:
    name: str  # the page's URL path and the command line's first subcommand
    title: str
    icon: str  # a Material icon, ":material/<name>:"
    blurb: str  # one sentence or two for the home page
    command: str  # command(subparsers) adds the lab's subcommands, each with run= and format=
    params: str  # params(hosting) -> the page's URL parameters (urlstate.Param), in order
    page: str = ""  # the page file, relative to app.py; default views/<name>.py
    # For a lab whose work runs in worker processes (symlab.runs): its specs.run_kind.RunKind.
    runs: str = ""
    # tasks(values) -> the specs.tasks.Tasks its page computes for the controls' values (as
    # urlstate.parse_query gives them): a starting server begins the default link's at once (serve.py),
    # and computes the presets' and their neighbours' in idle time (symlab.serving.warmup).
    tasks: str = ""
    # Whether the package ships the default link's task results (symlab.serving.precomputed): False where they
    # train in a few seconds and the page shows something meanwhile (the toy's first frame).
    ships_defaults: bool = True
    # The page's presets: a specs.presets.Presets.
    presets: str = ""
    # What the lab measured (a module: its numbers(shipped) -> dict, and findings(numbers) -> [specs.findings.Finding]),
    # for the home page, the README and the class path (symlab.serving.findings gathers them).
    findings: str = ""
    # Every dataclass its results may hold, at the top or nested (a report's config, a posterior's layout), as
    # "module:QualName": the only types symlab.serving.codec writes and builds back (the result store's entries, an
    # upload analysis's answer), so that stored bytes can only choose among types the code names.
    results: tuple[str, ...] = ()

    def __post_init__(self):
        if not self.page:
            object.__setattr__(self, "page", f"views/{self.name}.py")

    def register(self, subparsers) -> None:
        part(self.command)(subparsers)

    def page_params(self, hosting=None) -> tuple:
        return tuple(part(self.params)(hosting))

    def page_tasks(self, values: dict) -> list:
        return part(self.tasks)(values) if self.tasks else []

    def page_presets(self) -> Presets:
        return part(self.presets) if self.presets else Presets({})

    def run_kind(self):
        return part(self.runs)

    def result_types(self) -> tuple[type, ...]:
        return tuple(part(name) for name in self.results)

    def default_values(self, hosting=None) -> dict:
        """The controls' values of the page's default link."""
        return parse_query({}, self.page_params(hosting))[0]
