"""The class path (symlab/specs/lessons.toml) on the pages: the steps on the home page, and the next step at
the end of each lab page."""

from __future__ import annotations

from functools import cache
from urllib.parse import urlencode

import streamlit as st

from symlab.labs import LABS
from symlab.serving import findings
from symlab.specs.lessons import LessonPath, Step, lesson_path
from symlab.specs.settings import Hosting
from symlab.specs.urlstate import encode_query
from views.common import binding, pages

LABS_BY_NAME = {lab.name: lab for lab in LABS}


@cache
def class_path() -> LessonPath:
    return lesson_path()


@cache  # a step's state and link depend only on the step and the server's settings: made once, not on every run
def step_state(step: Step, hosting: Hosting) -> dict:
    """The controls' values of ``step``'s preset on a server of ``hosting`` (those presets leave to the user aside)."""
    lab = LABS_BY_NAME[step.lab]
    return lab.page_presets().state(step.preset, binding.page_specs(lab, hosting))


@cache
def step_link(step: Step, hosting: Hosting) -> str:
    """The link to ``step``'s page with its preset, relative to the app's root: the values in which the preset's
    state differs from the page's default link."""
    lab = LABS_BY_NAME[step.lab]
    specs, defaults = binding.page_specs(lab, hosting), lab.default_values(hosting)
    default = encode_query(defaults, specs)
    encoded = encode_query({**defaults, **step_state(step, hosting)}, specs)
    changed = {name: value for name, value in encoded.items() if value != default[name]}
    return step.lab + (f"?{urlencode(changed)}" if changed else "")


OPENED = "lessons.opened"  # the class-path step this session last opened or saw: a moved control's "next" follows it


def open_step(step: Step, specs, state: dict) -> None:
    """A step's button's callback: its preset's values set before the run draws them, and the step remembered."""
    binding.set_page_values(step.lab, specs, state)
    st.session_state[OPENED] = step.number


def open_button(step: Step, key: str, on_page: str | None = None) -> None:
    """A button that opens ``step``'s page with its preset set, in this session (from the page ``on_page``)."""
    lab, hosting = LABS_BY_NAME[step.lab], binding.server_settings()
    # The values are set in the click's callback, before this run draws any widget that holds them.
    if (
        st.button(
            f"Open step {step.number}: {lab.title}, *{step.preset}*",
            key=key,
            icon=":material/arrow_forward:",
            help=f"Or share the link: {step_link(step, hosting)}",
            on_click=open_step,
            args=(step, binding.page_specs(lab, hosting), step_state(step, hosting)),
        )
        and step.lab != on_page
    ):
        st.switch_page(pages.lab_page(lab))


def show_path() -> None:
    """The home page's list of the class path's steps."""
    path = class_path()
    st.subheader(path.title)
    st.caption(
        f"{len(path.steps)} steps, {path.minutes} minutes. Predict the answer to each question first, then "
        "open its step: the page opens on the preset that answers it."
    )
    for step in path.steps:
        st.markdown(f"**{step.number}.** {step.question} *({step.minutes} min)*")
        open_button(step, f"lessons.open_{step.number}")


def show_next_step(lab_name: str) -> None:
    """At the end of a lab page: what the class path's current step shows, and a button to its next step."""
    path = class_path()
    lab = LABS_BY_NAME[lab_name]
    specs = binding.page_specs(lab)
    try:
        preset = lab.page_presets().matching(binding.current_values(lab_name, specs), specs)
    except KeyError:  # the page stopped before its controls were bound
        return
    here = next((step for step in path.steps if step.lab == lab_name and step.preset == preset), None)
    if here is not None:
        st.session_state[OPENED] = here.number  # shown: a control moved from here goes on after it
    following = path.next_step(lab_name, preset, st.session_state.get(OPENED))
    st.divider()
    if here is not None:
        st.caption(f"Class path, step {here.number} of {len(path.steps)}: {here.seen(findings.numbers())}")
    if following is None:
        st.caption("That was the class path's last step.")
        return
    st.markdown(f"**Next in the class path:** {following.question}")
    open_button(
        following, f"lessons.next_{following.number}", on_page=lab_name
    )  # a key per step: a click is for that step
