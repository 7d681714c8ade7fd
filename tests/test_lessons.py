"""The class path (symlab/specs/lessons.toml): every lab, preset and link it names exists, and the pages walk it."""

from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from streamlit.testing.v1 import AppTest

from symlab.labs import LABS
from symlab.serving import findings
from symlab.specs.lessons import lesson_path
from symlab.specs.settings import Hosting
from symlab.specs.urlstate import parse_query
from views.common import lessons

ROOT = Path(__file__).resolve().parents[1]
LABS_BY_NAME = {lab.name: lab for lab in LABS}
PATH = lesson_path()


def test_every_step_names_a_lab_and_one_of_its_presets_and_asks_a_question():
    assert 40 <= PATH.minutes <= 55 and len(PATH.steps) >= 5
    for step in PATH.steps:
        assert step.lab in LABS_BY_NAME, step
        assert step.preset in LABS_BY_NAME[step.lab].page_presets(), step
        assert step.question.endswith("?") and step.see and step.minutes > 0
    assert {step.lab for step in PATH.steps} == set(LABS_BY_NAME)  # the path visits every lab


def test_each_steps_link_opens_its_preset_without_a_notice():
    for step in PATH.steps:
        lab = LABS_BY_NAME[step.lab]
        hosting = Hosting.defaults(False)
        address = urlsplit(lessons.step_link(step, hosting))
        assert address.path == step.lab
        specs = lab.page_params(hosting)
        values, notices = parse_query(dict(parse_qsl(address.query)), specs)
        assert not notices, (step, notices)
        assert lab.page_presets().matching(values, specs) == step.preset, step


def test_the_next_step_follows_the_current_one_and_a_custom_state_the_step_last_opened():
    first, second, third = PATH.steps[:3]
    assert first.lab == second.lab == third.lab  # the mode interpolation's three steps open the path
    assert PATH.next_step(first.lab, first.preset) == second
    # A lab's default link (no step's preset) starts its part of the path: the /modes default link sent students
    # to step 4, past the three steps on that page.
    assert PATH.next_step(first.lab, "custom") == first
    assert PATH.next_step(first.lab, "custom", opened=second.number) == third  # a control moved after step 2
    other = next(step for step in PATH.steps if step.lab != first.lab)
    assert PATH.next_step(first.lab, "custom", opened=other.number) == first  # a step of another lab: not here
    assert PATH.next_step(other.lab, "custom") == other
    final = PATH.steps[-1]
    assert PATH.next_step(final.lab, final.preset) is None


def test_home_lists_the_path_and_a_step_opens_its_page_on_its_preset_which_points_to_the_next():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    assert not at.exception
    assert at.subheader[1].value == PATH.title
    shown = [button.label for button in at.button]
    assert len([label for label in shown if label.startswith("Open step")]) == len(PATH.steps)
    second = PATH.steps[1]
    at.button(key="lessons.open_2").click().run()
    assert not at.exception
    assert at.selectbox(key=f"{second.lab}.preset").value == second.preset
    assert any(second.seen(findings.numbers()) in caption.value for caption in at.caption)
    third = PATH.steps[2]
    assert any(third.question in markdown.value for markdown in at.markdown)
    at.button(key=f"lessons.next_{third.number}").click().run()
    assert at.selectbox(key=f"{third.lab}.preset").value == third.preset
    assert at.title[0].value == "Mode interpolation"  # the same page, now on the next step's preset
    fourth = PATH.steps[3]
    at.button(key=f"lessons.next_{fourth.number}").click().run()
    assert not at.exception and at.selectbox(key=f"{fourth.lab}.preset").value == fourth.preset


def test_a_control_moved_on_a_step_keeps_the_step_after_it_next():
    """On step 2's preset, a moved slider makes the state no step's; "Next in the class path" stays step 3, on the
    same page (it went on after the lab's last step, 4, skipping 3)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("views/modes.py")
    at.run()
    assert not at.exception
    first, second, third = PATH.steps[:3]
    next_buttons = lambda: [button.key for button in at.button if str(button.key).startswith("lessons.next_")]
    assert next_buttons() == [f"lessons.next_{second.number}"]  # the default link is step 1
    at.button(key=f"lessons.next_{second.number}").click().run()
    assert at.selectbox(key=f"{second.lab}.preset").value == second.preset
    at.slider[0].set_value(at.slider[0].max).run()
    assert not at.exception and at.selectbox(key=f"{second.lab}.preset").value != second.preset
    assert next_buttons() == [f"lessons.next_{third.number}"]
