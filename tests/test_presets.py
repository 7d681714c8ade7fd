"""Presets are complete states: whatever was chosen or moved before, a preset gives the same link."""

import itertools

import pytest

from symlab.labs import LABS
from symlab.specs.presets import CUSTOM, Presets
from symlab.specs.settings import Hosting
from symlab.specs.urlstate import Param, encode_query, neighbours
from views.common import binding

HOSTINGS = {"local": Hosting.defaults(False), "hosted": Hosting.defaults(True)}
WITH_PRESETS = [lab for lab in LABS if len(lab.page_presets())]


def opened(lab, specs) -> dict:
    """A session as a page's default link leaves it: every control's widget key at its default."""
    return {
        binding.widget_key(lab.name, spec.name): value
        for spec, value in zip(specs, lab.default_values(HOSTINGS["local"]).values())
    }


def link(lab, specs, session) -> dict:
    """The URL the page writes for ``session``'s controls (binding.sync_url's encoding)."""
    return encode_query(binding.current_values(lab.name, specs, session), specs)


def test_every_lab_page_has_presets():
    assert {lab.name for lab in WITH_PRESETS} == {lab.name for lab in LABS}


@pytest.mark.parametrize("hosting", HOSTINGS)
@pytest.mark.parametrize("lab", WITH_PRESETS, ids=lambda lab: lab.name)
def test_presets_name_only_the_pages_controls_with_values_they_keep(lab, hosting):
    specs = lab.page_params(HOSTINGS[hosting])
    lab.page_presets().check(specs)  # raises on an unknown or kept control, or a value the URL would change


@pytest.mark.parametrize("lab", WITH_PRESETS, ids=lambda lab: lab.name)
def test_every_ordered_pair_of_presets_gives_the_second_ones_link(lab):
    """After preset A (and after A with every control then moved a step), preset B gives B's own link: nothing
    of A, or of the moves, survives but what B leaves to the user."""
    specs, presets = lab.page_params(HOSTINGS["local"]), lab.page_presets()
    alone = {}
    for name in presets:
        session = opened(lab, specs)
        binding.apply_preset(session, lab.name, specs, presets, name)
        alone[name] = link(lab, specs, session)
    for first, second in itertools.product(presets, repeat=2):
        session = opened(lab, specs)
        binding.apply_preset(session, lab.name, specs, presets, first)
        assert presets.matching(binding.current_values(lab.name, specs, session), specs) == first
        moved = [state for state in neighbours(binding.current_values(lab.name, specs, session), specs)]
        for state in moved[::2]:  # a step of one control after another
            session.update(
                {
                    binding.widget_key(lab.name, name): value
                    for name, value in state.items()
                    if name not in presets.keeps
                }
            )
        binding.apply_preset(session, lab.name, specs, presets, second)
        assert link(lab, specs, session) == alone[second], (first, second)


@pytest.mark.parametrize("lab", WITH_PRESETS, ids=lambda lab: lab.name)
def test_a_preset_is_recognised_until_a_control_it_sets_moves(lab):
    specs, presets = lab.page_params(HOSTINGS["local"]), lab.page_presets()
    for name in presets:
        state = {**lab.default_values(HOSTINGS["local"]), **presets.state(name, specs)}
        assert presets.matching(state, specs) == name  # no two presets share a state
        for moved in neighbours(state, specs):
            changed = next(control for control in state if moved[control] != state[control])
            assert (presets.matching(moved, specs) == name) == (changed in presets.keeps), (name, changed)


def test_presets_refuse_unknown_and_kept_controls_and_values_the_link_would_change():
    specs = (
        Param("x", "float", 1.0, 0.0, 2.0),
        Param("seed", "int", 0, 0, 10),
        Param("view", "choice", "a", choices=("a", "b")),
    )
    Presets({"p": ({"x": 2.0, "seed": 3}, "watch")}, keeps={"view": "a way of looking"}).check(specs)
    for presets, message in (
        (Presets({"p": ({"y": 1.0}, "")}), "no control for"),
        (Presets({"p": ({"view": "b"}, "")}, keeps={"view": ""}), "leave to the user"),
        (Presets({"p": ({"x": 5.0}, "")}), "would not keep"),
        (Presets({}, keeps={"colour": ""}), "not among"),
    ):
        with pytest.raises(ValueError, match=message):
            presets.check(specs)
    with pytest.raises(ValueError, match="custom"):
        Presets({CUSTOM: ({}, "")})


def test_a_state_that_is_no_presets_is_custom():
    specs = (Param("x", "float", 1.0, 0.0, 2.0), Param("seed", "int", 0, 0, 10))
    presets = Presets({"two": ({"x": 2.0}, ""), "seeded": ({"seed": 3}, "")})
    assert presets.matching({"x": 2.0, "seed": 0}, specs) == "two"
    assert presets.matching({"x": 2.0, "seed": 3}, specs) == CUSTOM  # "two" sets the seed too: 0
    assert presets.state("seeded", specs) == {"x": 1.0, "seed": 3}
