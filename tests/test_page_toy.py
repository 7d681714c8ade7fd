"""AppTest checks of the Tractable BNN page (its player's timer is covered in test_browser.py)."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from vegatest import vega_charts

from symlab.labs.toy import LAB, params
from symlab.labs.toy import experiment as toy
from symlab.lib import two_relu
from symlab.specs import controls

PAGE = str(Path(__file__).resolve().parents[1] / "views" / "toy.py")


def toy_page(**query) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.query_params.update(query)
    return at.run()


def metrics(at):
    return {m.label: m.value for m in at.metric}


def test_default_view_and_url():
    at = toy_page()
    assert not at.exception
    assert float(metrics(at)["log p(D) (exact)"]) < 0
    assert at.query_params["alpha"] == "0.25" and at.query_params["seed"] == "0"


def test_step_trains_and_reset_restores_the_start():
    at = toy_page()
    start = metrics(at)["MFVI: ELBO"]
    at.button(key="toy.step").click().run()
    assert metrics(at)["MFVI: ELBO"] != start
    at.button(key="toy.reset").click().run()
    assert metrics(at)["MFVI: ELBO"] == start


def test_slider_changes_the_exact_posterior():
    at = toy_page()
    before = metrics(at)["log p(D) (exact)"]
    at.slider(key="toy.alpha").set_value(1.5).run()
    assert metrics(at)["log p(D) (exact)"] != before and at.query_params["alpha"] == "1.5"


def test_new_seed_is_a_separate_action():
    at = toy_page(seed="7")
    assert at.number_input(key="toy.seed").value == 7
    at.button(key="toy.new_seed").click().run()
    assert at.number_input(key="toy.seed").value == 8 and at.query_params["seed"] == "8"


def test_query_parameters_restore_the_state():
    at = toy_page(alpha="1.25", noise="0.3", n="40", mi="infonce", K="8", init="origin", alphas="0.5,2", seeds="2")
    assert not at.exception and not at.warning
    assert at.slider(key="toy.alpha").value == 1.25 and at.number_input(key="toy.n").value == 40
    assert at.number_input(key="toy.K").value == 8 and at.text_input(key="toy.alphas").value == "0.5, 2"


@pytest.mark.parametrize(
    "query",
    [{"alpha": "x"}, {"n": "-4"}, {"mi": "magic"}, {"alphas": "1,zz"}, {"seed": "1e99"}, {"lr": "nan"}, {"K": "2.5"}],
)
def test_bad_parameters_give_a_notice(query):
    at = toy_page(**query)
    assert not at.exception
    assert len(at.warning) == 1 and "adjusted" in at.warning[0].value


def test_paper_table_runs_and_shows_both_methods():
    at = toy_page(alphas="0.25,1", seeds="2")
    at.button(key="toy.run_table").click().run()
    assert not at.exception
    table = at.dataframe[0].value
    assert list(table["method"]) == ["MFVI", "SGM", "MFVI", "SGM"]
    paired = at.dataframe[1].value
    assert list(paired["α"]) == [0.25, 1.0] and all(v.endswith("/ 2") for v in paired["seeds with higher bound"])


def test_preset_sets_the_controls():
    at = toy_page()
    at.selectbox(key="toy.preset").set_value("Far-apart modes").run()
    assert at.slider(key="toy.alpha").value == 2.0 and at.query_params["noise"] == "0.25"


def test_a_preset_after_another_gives_its_own_state_and_a_moved_control_shows_custom():
    """The lecturer's sequences: nothing of the first preset (a seed, an initialisation) survives the second."""
    at = toy_page()
    assert at.selectbox(key="toy.preset").value == "Close modes (paper default)"  # the default link is that preset
    for first, second, name, expected in (
        ("A stuck start (α = 3, one start)", "Close modes (paper default)", "seed", "0"),
        ("Start at the origin", "InfoNCE with K = 2", "init", "random"),
    ):
        at.selectbox(key="toy.preset").set_value(first).run()
        at.selectbox(key="toy.preset").set_value(second).run()
        assert not at.exception and at.query_params[name] == expected, (first, second)
        alone = toy_page()
        alone.selectbox(key="toy.preset").set_value(second).run()
        assert dict(at.query_params) == dict(alone.query_params)
    at.slider(key="toy.alpha").set_value(1.0).run()
    assert at.selectbox(key="toy.preset").value == "custom"
    assert not any("estimator" in info.value for info in at.info)  # the preset's sentence has gone with it


def test_widgets_show_the_url_parameters_ranges_and_state_the_caps():
    """Each sidebar widget's range is its URL parameter's, which is the declared one or the page's cap."""
    at = toy_page()
    by_name = {param.name: param for param in LAB.page_params(None)}
    for name in params.FIELDS:
        spec = controls.declaration(toy.ToyConfig, name)
        key = f"toy.{controls.url_name(toy.ToyConfig, name)}"
        param = by_name[controls.url_name(toy.ToyConfig, name)]
        if spec.choices:
            widget = next(w for w in at.get("button_group") if w.key == key)
            assert [option.content for option in widget.proto.options] == list(spec.choices)
            continue
        widget = at.slider(key=key) if spec.widget_kind == "slider" else at.number_input(key=key)
        assert (widget.label, widget.min, widget.max) == (spec.label, param.low, param.high)
        assert ("This page allows at most" in (widget.help or "")) == (name in params.CAPS)


def test_play_at_the_end_replays_training_from_the_start():
    at = toy_page(lr="0.05")
    playback = at.session_state["toy.playback"]
    playback.frame = playback.frames - 1
    at.run()
    assert at.button(key="toy.step").disabled  # the last frame: nothing further to step to
    assert at.get("progress")[0].proto.text == "Adam step 4000 / 4000"
    at.button(key="toy.play").click().run()  # from the end, Play starts over: the same run again
    trainer, frame = at.session_state["toy.live"][1], at.session_state["toy.playback"].frame
    # Play's click advances one tick; the rerun that starts the timer, if it came a tick later, another.
    assert 1 <= frame <= 2 and trainer.history[0].step == list(range(0, 20 * frame + 1, 20))
    config = trainer.runs[0].tag
    fresh = two_relu.ToyTrainer(toy.starts_of("mfvi", config) + toy.starts_of("sgm", config))
    fresh.train_to(20 * frame, 20)
    assert [h.elbo_g for h in trainer.history] == [h.elbo_g for h in fresh.history]


def test_a_stuck_fit_is_named_and_more_restarts_recover():
    """α = 3, seed 11, one start: trained to the end, MFVI and SGM both end with both units on one side, and the
    page names it with what to do; with four starts the kept fits are at a mode."""
    at = toy_page()
    at.selectbox(key="toy.preset").set_value("A stuck start (α = 3, one start)").run()
    assert at.query_params["restarts"] == "1" and at.query_params["seed"] == "11"
    for restarts, stuck in ((1, True), (4, False)):
        at.number_input(key="toy.restarts").set_value(restarts).run()
        playback = at.session_state["toy.playback"]
        playback.frame = playback.frames - 1
        at.run()
        named = [w.value for w in at.warning if toy.STUCK in w.value]
        assert len(named) == (2 if stuck else 0), [w.value for w in at.warning]
        assert all("press New seed or raise Restarts" in text for text in named)
        starts = next(c.value for c in at.caption if "kept" in c.value)
        assert f"start 1 of {restarts} kept" in starts or not stuck
        assert ("(both units on one side)" in starts) == stuck and ("(at a mode)" in starts) != stuck


# -- issue 31: charts that fit, captions that wait for a fit, a reload that resumes, seeds that run as shown ------


def test_every_live_chart_fits_its_column_and_the_posterior_stays_square():
    """No fixed width (a 400 px posterior ran past a 368 px column and off a phone): each chart takes its
    column's width, the posterior's plot as tall as it is wide, and each legend wraps to the width it gets."""
    for present in ("0", "1"):
        at = toy_page(alpha="2.0", noise="0.25", n="30", present=present)
        drawn = vega_charts(at)
        assert len(drawn) == 4
        for chart in drawn:
            spec = chart["spec"]
            assert "width" not in spec and spec.get("autosize", {}).get("type") != "pad", chart["title"]
            assert "expr" in str(spec["config"]["legend"]["columns"]), chart["title"]
        [posterior] = [chart for chart in drawn if "posterior" in str(chart["spec"]["title"]["text"])]
        assert posterior["spec"]["autosize"]["type"] == "fit-x"
        assert {"name": "height", "expr": "width"} in posterior["spec"]["params"]


def test_step_zero_shows_the_starting_points_not_a_fit():
    """Before any training there is no fit to keep, place (at a mode) or call stuck."""
    at = toy_page(alpha="3", noise="0.5", n="10", restarts="1", seed="11")
    captions = [caption.value for caption in at.caption]
    assert not any("kept" in text for text in captions), captions
    assert any(text.startswith("Adam step 0, before training: each method's one starting point") for text in captions)
    assert not any(toy.STUCK in warning.value for warning in at.warning)
    at.button(key="toy.step").click().run()
    assert any("start 1 of 1 kept" in caption.value for caption in at.caption)


def test_a_reload_resumes_training_where_it_was_paused():
    """The link keeps the paused step; a new session opened on it replays the seeded training to that step,
    paused, and says so: the same numbers as the session that wrote the link."""
    at = toy_page()
    for _ in range(3):
        at.button(key="toy.step").click().run()
    assert at.query_params["adam_step"] == "60"
    assert at.selectbox(key="toy.preset").value == "Close modes (paper default)"  # a place in a run, not a setting
    reloaded = toy_page(**{name: at.query_params[name] for name in at.query_params})
    assert not reloaded.exception
    assert reloaded.get("progress")[0].proto.text == "Adam step 60 / 4000"
    assert not reloaded.session_state["toy.playback"].playing
    assert metrics(reloaded) == metrics(at)
    assert [info.value for info in reloaded.info if "Resumed" in info.value] == [
        "Resumed at Adam step 60: training replayed from its seed."
    ]
    reloaded.button(key="toy.step").click().run()  # on from there: the notice has done its work
    assert reloaded.query_params["adam_step"] == "80" and not any("Resumed" in i.value for i in reloaded.info)
    reloaded.slider(key="toy.alpha").set_value(1.0).run()  # new settings train from the start
    assert reloaded.query_params["adam_step"] == "0"
    assert reloaded.get("progress")[0].proto.text == "Adam step 0 / 4000"


def test_a_reload_too_long_to_replay_says_where_it_resumed():
    """At the page's caps 4000 steps take far longer to replay than the page waits: it stops at a whole tick,
    says so, and the link follows the step shown."""
    at = toy_page(alpha="3", n="500", batch="500", restarts="8", adam_step="4000")
    assert not at.exception
    shown = int(at.query_params["adam_step"])
    assert shown < 4000 and shown % 20 == 0
    assert at.get("progress")[0].proto.text == f"Adam step {shown} / 4000"
    [notice] = [warning.value for warning in at.warning if "Resumed" in warning.value]
    assert notice.startswith(f"Resumed at Adam step {shown}, not the link's 4000: replaying 4000 steps")


def test_seeds_out_of_range_become_the_seeds_that_run():
    """99999999 seeds: the box shows what the table will run, and the range (the server's cap on α values ×
    seeds included) is stated; never a number out of range beside a different one in use."""
    at = toy_page(alphas="0.25,0.5,0.75,1")
    at.number_input(key="toy.seeds").set_value(99999999).run()
    assert at.number_input(key="toy.seeds").value == 25 and at.query_params["seeds"] == "25"
    assert not at.button(key="toy.run_table").disabled
    assert any("Seeds: 25, not 99999999" in info.value and "1 to 25 seeds" in info.value for info in at.info)
    box = at.number_input(key="toy.seeds")
    assert box.min is None and box.max is None  # no range for the browser to hold a red number against
    assert "1 to 25 seeds with 4 α values" in box.help
    box.set_value(0).run()
    assert at.number_input(key="toy.seeds").value == 1
    # More α values after the seeds were set: running is blocked, with the range for these α values.
    at.number_input(key="toy.seeds").set_value(25).run()
    at.text_input(key="toy.alphas").input("0.25,0.5,0.75,1,1.25").run()
    assert at.button(key="toy.run_table").disabled
    assert any("use 1 to 20 seeds" in warning.value for warning in at.warning)
