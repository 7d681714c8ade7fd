"""AppTest checks of the Tractable BNN page (its player, played in the browser, is covered in test_browser.py)."""

import concurrent.futures
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from symlab.labs.toy import LAB, live, params
from symlab.labs.toy import experiment as toy
from symlab.serving import shared_results
from symlab.specs import controls
from views.common import computing
from views.common.animation import sent as player_document

PAGE = str(Path(__file__).resolve().parents[1] / "views" / "toy.py")


def toy_page(**query) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.query_params.update(query)
    return at.run()


def trained(at: AppTest, seconds: float = 120.0) -> AppTest:
    """Run the page again until the live run it waits for (a shared task) is done (AppTest runs no fragment)."""
    deadline = time.monotonic() + seconds
    while any(bar.proto.text.startswith("⏳") for bar in at.get("progress")):
        assert time.monotonic() < deadline, "the live run took too long"
        time.sleep(0.2)
        at.run()
    return at


def player(at: AppTest) -> dict:
    """What the page sent the browser's player: its charts, its frames (gzipped) and where it starts."""
    [element] = [e for e in at.get("bidi_component") if e.proto.component_name == "symlab_player"]
    return player_document(element.proto)


def tell(at: AppTest, frame: int, playing: bool = False) -> AppTest:
    """The browser's player telling the page where it stands, as a click on Play, Pause, Step or Reset does."""
    at.session_state["toy.player"] = {"position": {"id": player(at)["id"], "frame": frame, "playing": playing}}
    return at.run()


def metrics(at):
    return {m.label: m.value for m in at.metric}


def test_default_view_and_url():
    at = toy_page()
    assert not at.exception
    assert float(metrics(at)["log p(D) (exact)"]) < 0
    assert at.query_params["alpha"] == "0.25" and at.query_params["seed"] == "0"


def test_the_players_frame_is_the_pages_step_and_the_link_follows_it():
    """Pause or Step at frame 3 shows step 60's numbers and writes adam_step=60; Reset, frame 0, brings back the
    start's; while playing the page shows no stale numbers and keeps the link."""
    at = trained(toy_page())
    start = metrics(at)["MFVI: ELBO"]
    assert player(at)["frames"] == 201 and player(at)["frame"] == 0
    tell(at, 3)
    assert metrics(at)["MFVI: ELBO"] != start and at.query_params["adam_step"] == "60"
    tell(at, 9, playing=True)
    assert not at.metric and at.query_params["adam_step"] == "60"
    assert any("Playing in your browser" in caption.value for caption in at.caption)
    tell(at, 0)
    assert metrics(at)["MFVI: ELBO"] == start and at.query_params["adam_step"] == "0"


def test_the_first_frame_shows_while_the_whole_run_trains(monkeypatch):
    """A setting nobody has trained: the first run draws the player at its start (one frame) above the waiting
    panel; the next run after the task has all 201."""
    monkeypatch.setattr(computing, "WAIT_IN_RUN_SECONDS", 0.01)  # as a server's page: it waits no longer
    at = toy_page(seed="977")
    assert player(at)["frames"] == 1 and any(bar.proto.text.startswith("⏳") for bar in at.get("progress"))
    assert float(metrics(at)["log p(D) (exact)"]) < 0
    assert player(trained(at))["frames"] == 201


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


def test_a_stuck_fit_is_named_and_more_restarts_recover():
    """α = 3, seed 11, one start: trained to the end, MFVI and SGM both end with both units on one side, and the
    page names it with what to do; with four starts the kept fits are at a mode."""
    at = toy_page()
    at.selectbox(key="toy.preset").set_value("A stuck start (α = 3, one start)").run()
    assert at.query_params["restarts"] == "1" and at.query_params["seed"] == "11"
    for restarts, stuck in ((1, True), (4, False)):
        at.number_input(key="toy.restarts").set_value(restarts).run()
        tell(trained(at), 200)
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
        drawn = player(at)["charts"]
        assert [chart["name"] for chart in drawn] == ["posterior", "predictions", "bounds", "mse"]
        for chart in drawn:
            spec = chart["spec"]
            assert "width" not in spec and spec.get("autosize", {}).get("type") != "pad", chart["name"]
            assert "expr" in str(spec["config"]["legend"]["columns"]), chart["name"]
        [posterior] = [chart for chart in drawn if chart["name"] == "posterior"]
        assert posterior["spec"]["autosize"]["type"] == "fit-x"
        assert {"name": "height", "expr": "width"} in posterior["spec"]["params"]
        assert set(posterior["static"]) == {"image"}  # the exact posterior: a picture sent once, not per frame


def test_step_zero_shows_the_starting_points_not_a_fit():
    """Before any training there is no fit to keep, place (at a mode) or call stuck."""
    at = trained(toy_page(alpha="3", noise="0.5", n="10", restarts="1", seed="11"))
    captions = [caption.value for caption in at.caption]
    assert not any("kept" in text for text in captions), captions
    assert any(text.startswith("Adam step 0, before training: each method's one starting point") for text in captions)
    assert not any(toy.STUCK in warning.value for warning in at.warning)
    tell(at, 1)
    assert any("start 1 of 1 kept" in caption.value for caption in at.caption)


def test_a_link_opens_at_its_step_paused_and_new_settings_start_over():
    """The link keeps the paused step; a new session opened on it opens the player there, paused, with the same
    numbers as the session that wrote the link (the run is the same for both: computed once). A step between two
    frames opens at the frame before it, and the link says so."""
    at = trained(toy_page())
    tell(at, 3)
    assert at.query_params["adam_step"] == "60"
    assert at.selectbox(key="toy.preset").value == "Close modes (paper default)"  # a place in a run, not a setting
    reloaded = trained(toy_page(**{name: at.query_params[name] for name in at.query_params}))
    assert not reloaded.exception and player(reloaded)["frame"] == 3
    assert metrics(reloaded) == metrics(at)
    between = trained(toy_page(adam_step="70"))
    assert player(between)["frame"] == 3 and between.query_params["adam_step"] == "60"
    reloaded.slider(key="toy.alpha").set_value(1.0).run()  # new settings play from the start
    assert reloaded.query_params["adam_step"] == "0" and player(reloaded)["frame"] == 0


def test_a_link_at_the_caps_last_step_opens_there_once_trained():
    """At the page's caps the whole run (8 starts a method, N = 500) trains in a worker, once; the link's last
    step then opens exactly, where replaying it in the page could not."""
    at = trained(toy_page(alpha="3", n="500", batch="500", restarts="8", adam_step="4000"), seconds=300)
    assert not at.exception
    assert player(at)["frame"] == 200 and at.query_params["adam_step"] == "4000"


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


def test_a_seeds_change_that_arrives_after_the_page_was_left_changes_nothing(monkeypatch):
    """In a class's load test a student's seeds change reached the server after they had opened another page: its
    callback read the table's α values, whose widget state was gone, and the page showed an error (KeyError)."""
    import views.toy as page

    left = {"toy.seeds": 99}  # the seeds box's change; the α values' state gone with the page
    monkeypatch.setattr(page.st, "session_state", left)
    page.seeds_in_range()
    assert left == {"toy.seeds": 99}
    kept = {"toy.seeds": 99, "toy.alphas": "0.25, 1, 2"}  # still on the page: the nearest the table may run
    monkeypatch.setattr(page.st, "session_state", kept)
    page.seeds_in_range()
    assert kept["toy.seeds"] == page.seeds_range(3)[1] < 99 and kept[page.SEEDS_NOTICE].startswith("Seeds: ")


def test_a_new_seed_click_that_arrives_after_the_page_was_left_changes_nothing(monkeypatch):
    from views.common import binding

    left: dict = {}
    monkeypatch.setattr(binding.st, "session_state", left)
    binding.advance_seed("toy")
    assert left == {}
    here = {"toy.seed": 99_999}
    monkeypatch.setattr(binding.st, "session_state", here)
    binding.advance_seed("toy")
    assert here == {"toy.seed": 0}


def test_a_training_that_gave_way_is_said_as_an_error_and_the_next_run_asks_again(monkeypatch):
    """A newer request of the same browser (another tab) takes a queued training's place: the page that waited for
    it says so in words, keeps its controls, and asks again on its next run (no traceback, no exception)."""
    # A store of its own (trained in the page's run): another test's stored run would be drawn at once.
    monkeypatch.setattr(shared_results, "_shared", shared_results.SharedResults(workers=0))
    config = toy.ToyConfig().validate()
    gave_way = computing.failure_text(live.live_task(config), concurrent.futures.CancelledError())
    assert "a newer request of this browser" in gave_way and "move a control or reload" in gave_way
    gone = concurrent.futures.Future()
    gone.cancel()
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.session_state["ui.job"] = shared_results.Job(live.live_task(config).key, "Training", gone)  # as it ended
    at.run()
    assert not at.exception
    assert [error.value for error in at.error] == [gave_way]
    assert at.sidebar.slider or at.slider  # the controls stay
    trained(at.run())  # the next run asks for it again and draws it
    assert not at.exception and not at.error and player(at)["frames"] > 1


def test_a_bound_gain_past_ln_2_says_mfvi_stopped_short_of_its_optimum():
    """ "Far-apart modes" ended at a gain of 0.708 nats with the step saying "exactly ln 2": the page now says why a
    run can show more (at both optima the gain is I ≤ ln 2), and says nothing where the gain is within ln 2."""
    from views import toy as toy_view

    note = toy_view.gain_note(0.708)
    assert note.startswith("SGM's bound is 0.708 nats above MFVI's") and "stopped short of its own optimum" in note
    assert toy_view.gain_note(0.6949) is None and toy_view.gain_note(0.2) is None
