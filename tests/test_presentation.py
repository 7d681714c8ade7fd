"""Presentation mode shows no controls on any page: every widget outside the sidebar (which it hides) sits in a
container it hides too (views.common.binding.controls_area), but for the allowances below."""

import pytest
from pagetest import open_page

from views.common.binding import CONTROLS_PREFIX

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py

WIDGETS = {
    "Button",
    "Selectbox",
    "Slider",
    "NumberInput",
    "TextInput",
    "Radio",
    "Toggle",
    "Multiselect",
    "Checkbox",
    "SelectSlider",
    "TextArea",
    "ButtonGroup",
    "DateInput",
    "ColorPicker",
    "Widget",
}
ALLOWED = {
    "leave_present": "the way back to the controls",
}
LINKS = [
    ("modes", {}),
    ("toy", {}),
    ("mnist", {}),
    ("symmetry", {}),
    ("symmetry", {"part": "network"}),
    ("align", {}),
    ("methods", {}),
]


def visible_widgets(node, hidden: bool = False) -> list[str]:
    """Keys (or labels) of the widgets under ``node`` that presentation mode leaves on the page."""
    block_id = getattr(getattr(node, "proto", None), "id", "") or ""
    hidden = hidden or f"-{CONTROLS_PREFIX}" in block_id
    found = []
    if type(node).__name__ in WIDGETS and not hidden:
        key = getattr(node, "key", None) or getattr(node, "label", "?")
        if key.rpartition(".")[2] not in ALLOWED:
            found.append(key)
    for child in (getattr(node, "children", None) or {}).values():
        found += visible_widgets(child, hidden)
    return found


@pytest.mark.parametrize("name,query", LINKS, ids=[f"{name}{query or ''}" for name, query in LINKS])
def test_presentation_mode_leaves_no_control_in_view(name, query):
    at = open_page(name, present="true", **query)
    assert not at.exception
    assert visible_widgets(at.main) == []
    assert at.button(key=f"{name}.leave_present")  # and the way back


def test_the_hidden_controls_keep_their_values_for_when_they_come_back():
    at = open_page("methods", present="true", seed="2")
    assert at.number_input(key="methods.seed").value == 2
    at.button(key="methods.leave_present").click().run()
    assert at.number_input(key="methods.seed").value == 2 and at.query_params.get("seed") == "2"
