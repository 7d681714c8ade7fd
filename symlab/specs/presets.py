"""Presets: complete states of a page's controls, each with one sentence on what to watch.

A preset names only the values that differ from the controls' defaults; :meth:`Presets.state` fills in the
rest, so choosing a preset gives the same state whatever was chosen or moved before, and a link that holds a
preset's state is recognised as that preset. The few controls a page leaves to the user (``keeps``, each
with the reason) are neither set nor compared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from symlab.specs.urlstate import Param, encode_query, parse_query

CUSTOM = "custom"  # the picker's entry for a state that is no preset's


@dataclass(frozen=True)
class Presets:
    # name -> (the values it sets apart from the defaults, one sentence on what to watch)
    choices: Mapping[str, tuple[Mapping[str, Any], str]]
    # controls that no preset sets or compares, each with the reason it is left to the user
    keeps: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        if CUSTOM in self.choices:
            raise ValueError(f"{CUSTOM!r} names the state that is no preset's; give the preset another name")

    def __iter__(self):
        return iter(self.choices)

    def __len__(self) -> int:
        return len(self.choices)

    def watch(self, name: str) -> str:
        return self.choices[name][1]

    def state(self, name: str, specs: Sequence[Param]) -> dict:
        """Every control's value under preset ``name`` but the kept ones': its own values, the others' defaults."""
        own = self.choices[name][0]
        return {spec.name: own.get(spec.name, spec.default) for spec in specs if spec.name not in self.keeps}

    def matching(self, values: Mapping[str, Any], specs: Sequence[Param]) -> str:
        """The first preset whose state ``values`` hold (kept controls aside), else :data:`CUSTOM`."""
        for name in self.choices:
            if all(values[control] == value for control, value in self.state(name, specs).items()):
                return name
        return CUSTOM

    def check(self, specs: Sequence[Param]) -> None:
        """Raise ValueError for a preset that names a control the page lacks or keeps, or a value its
        control would not accept as given (the URL's parser would change or refuse it)."""
        by_name = {spec.name: spec for spec in specs}
        unknown = set(self.keeps) - set(by_name)
        if unknown:
            raise ValueError(f"kept controls {sorted(unknown)} are not among the page's {sorted(by_name)}")
        for name, (values, _) in self.choices.items():
            for control in values:
                if control not in by_name:
                    raise ValueError(f"preset {name!r} sets {control!r}, which the page has no control for")
                if control in self.keeps:
                    raise ValueError(f"preset {name!r} sets {control!r}, which presets leave to the user")
            state = self.state(name, specs)
            shown = [spec for spec in specs if spec.name in state]
            parsed, notices = parse_query(encode_query(state, shown), shown)
            if notices or parsed != state:
                raise ValueError(f"preset {name!r} holds values its controls would not keep: {notices or parsed}")
