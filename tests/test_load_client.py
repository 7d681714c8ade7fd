"""The protocol-level load client (benchmarks/streamlit_protocol.py, load_test.py --protocol)."""

import asyncio
import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest
import websockets
from conftest import run_coroutine
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.NumberInput_pb2 import NumberInput
from streamlit.proto.Selectbox_pb2 import Selectbox
from streamlit.proto.Slider_pb2 import Slider

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import load_test  # noqa: E402
from streamlit_protocol import Session, Widget, drawn_value  # noqa: E402

pytestmark = pytest.mark.slow


def test_widget_states_are_what_the_frontend_sends():
    slider = Widget("slider", Slider(id="$$ID-abc-toy.alpha", min=0, max=3, step=0.05), [0.5])
    assert slider.key == "toy.alpha" and list(slider.state().double_array_value.data) == [0.5]
    # st.select_slider: the options' labels, not their indices (the server reads string_array_value)
    choice = Widget("slider", Slider(id="$$ID-abc-symmetry.max_width", options=["8", "16", "32"]), [2.0])
    assert list(choice.state().string_array_value.data) == ["32"]
    number = Widget("number_input", NumberInput(id="$$ID-abc-toy.n", min=1, max=500, step=1), 12)
    assert number.state().double_value == 12
    preset = Widget("selectbox", Selectbox(id="$$ID-abc-toy.preset", options=["—", "Far"]), "Far")
    assert preset.state().string_value == "Far"
    assert Widget("button", Slider(id="$$ID-abc-toy.play")).state() is None  # a button sends only when pressed


def test_a_waiting_panel_the_browser_draws_is_asked_about_until_done_then_the_page_runs_with_its_state():
    """As views/common/waiting.js: the panel's run counts as a wait; the session asks the route (no page run) until
    the answer says done, then sends one rerun whose panel state names the token."""
    from streamlit.proto.BidiComponent_pb2 import BidiComponent

    async def scenario():
        session = Session("http://127.0.0.1:1", timeout=5)
        sent, answers = [], [{"done": False, "fraction": 0.5, "text": "⏳ Training"}, {"done": True}]

        class Socket:
            async def send(self, payload):
                sent.append(BackMsg.FromString(payload))

        session.socket = Socket()
        session.ask_server = lambda path: answers.pop(0)
        document = {"token": "tok", "url": "/progress/tok", "interval_ms": 10, "fraction": 0.0, "text": "⏳"}
        message = ForwardMsg()
        message.delta.new_element.bidi_component.CopyFrom(
            BidiComponent(id="$$ID-abc-ui.waiting", component_name="symlab_waiting", json=json.dumps(document))
        )
        session.handle(message)
        assert session.run_pending and session.waiting is not None
        panel = session.waiting
        await session.ask(panel)  # not done: nothing sent, asked again later
        assert sent == [] and session.waiting is panel and session.polls == 1
        rerun = asyncio.create_task(session.ask(panel))  # done: the page runs again
        await asyncio.sleep(0.01)
        assert session.waiting is None and len(sent) == 1
        states = {state.id: state for state in sent[0].rerun_script.widget_states.widgets}
        assert json.loads(states["$$ID-abc-ui.waiting"].json_value) == {"done": "tok"}
        rerun.cancel()

    run_coroutine(scenario())


@pytest.mark.parametrize("kept", [False, True])
def test_a_tick_is_made_when_sent_and_not_for_a_timer_a_newer_run_stopped(kept):
    """A timer fires while the student's request is in flight; that request's full run (another page) ends
    the timer, as the frontend's is cleared: the tick is not sent (the server would drop it unanswered).
    A run that keeps the timer gets its tick."""

    async def scenario():
        session = Session("http://127.0.0.1:1", timeout=5)
        sent = []

        class Socket:
            async def send(self, payload):
                sent.append(BackMsg.FromString(payload))

        session.socket, session.timers = Socket(), {"player": 0.5}
        student = asyncio.create_task(session.request("open", session.rerun_message()))
        await asyncio.sleep(0)
        tick = asyncio.create_task(session.request("tick", functools.partial(session.timer_message, "player")))
        await asyncio.sleep(0)
        full_run = ForwardMsg()
        full_run.new_session.SetInParent()
        session.handle(full_run)  # a full-app run: it announces again the timers it keeps
        if kept:
            timer = ForwardMsg()
            timer.auto_rerun.fragment_id, timer.auto_rerun.interval = "player", 0.5
            session.handle(timer)
        finished = ForwardMsg(script_finished=ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY)
        session.handle(finished)
        assert await student is not None
        if kept:
            await asyncio.sleep(0)
            session.handle(finished)
        return await tick, sent, session.skipped_ticks

    latency, sent, skipped = run_coroutine(scenario())
    fragments = [message.rerun_script.fragment_id for message in sent]
    if kept:
        assert latency is not None and fragments == ["", "player"] and skipped == 0
    else:
        assert latency is None and fragments == [""] and skipped == 1


def test_a_request_in_flight_when_the_session_ends_is_not_a_disconnect():
    async def scenario():
        session = Session("http://127.0.0.1:1", timeout=5)

        class Socket:
            async def send(self, payload):
                pass

            async def close(self):
                pass

        session.socket = Socket()
        tick = asyncio.create_task(session.request("tick", session.rerun_message("player", timer=True)))
        await asyncio.sleep(0)
        await session.close()  # the phase's end
        session.pending.done.set_exception(websockets.ConnectionClosedOK(None, None))  # as the reader then does
        return await tick, session.errors

    latency, errors = run_coroutine(scenario())
    assert latency is None and not errors


def test_the_value_a_widget_shows():
    set_by_server = Slider(default=[0], value=[3], set_value=True)
    assert drawn_value("slider", set_by_server, held=[1.0]) == [3]
    assert drawn_value("slider", Slider(default=[0]), held=[1.0]) == [1.0]
    assert drawn_value("slider", Slider(default=[0]), held=None) == [0]
    # The server holds a select_slider's value it did not put in the proto: send nothing rather than [].
    assert drawn_value("slider", Slider(set_value=True), held=None) is None


def test_nudges_stay_in_range():
    import random

    rng = random.Random(0)
    top = Widget("slider", Slider(min=0, max=1, step=0.5), [1.0])
    assert all(0 <= load_test.nudged(top, rng)[0] <= 1 for _ in range(20))
    box = Widget("number_input", NumberInput(min=1, max=2, step=1, has_min=True, has_max=True), 1)
    assert all(1 <= load_test.nudged(box, rng) <= 2 for _ in range(20))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--protocol", "--sessions", "301"], "each N in 1..300"),
        (["--protocol", "--url", "http://example.org"], "only a server it starts"),
        (["--protocol", "--seconds", "5000"], "--seconds"),
        (["--proxy"], "go with --protocol"),
        (["--slowest-machine", "--sessions", "1"], "go with --protocol"),
    ],
)
def test_the_protocol_mode_is_bounded(argv, message, capsys):
    with pytest.raises(SystemExit):
        load_test.parse_args(argv)
    assert message in capsys.readouterr().err


def answered(what: str, sent: float, page: str = "toy"):
    from streamlit_protocol import Answered

    return Answered(what, 10.0, False, page, sent)


def test_each_script_run_counts_to_the_request_its_session_sent_before_it():
    first, second = Session("http://x"), Session("http://x")
    first.session_id, second.session_id = "a", "b"
    first.answered = [answered("open", 1.0), answered("tick", 2.0), answered("widget", 3.0)]
    second.answered = [answered("preset", 1.5, "modes")]
    runs = {
        "a": [
            (1.001, 40.0),
            (1.2, 20.0),  # the open, and the rerun it asked for
            (2.0005, 5.0),  # a tick, logged a hair before its send was stamped
            (3.01, 30.0),
        ],
        "b": [(1.51, 25.0)],
        "gone": [(1.0, 7.0)],
    }  # a session the test does not hold (an uploader's)
    cpu = load_test.page_cpu([first, second], runs)
    assert cpu["by_request"]["open"] == dict(count=1, cpu_ms_per_request=60.0, cpu_s=0.06)
    assert cpu["by_request"]["tick"]["cpu_ms_per_request"] == 5.0
    assert cpu["by_request"]["widget"]["cpu_ms_per_request"] == 30.0
    assert cpu["by_request"]["preset"]["cpu_ms_per_request"] == 25.0
    assert cpu["ticks_by_page"] == {"toy": dict(count=1, cpu_ms_per_tick=5.0)}
    assert cpu["runs_cpu_s"] == pytest.approx(0.127) and cpu["matched_cpu_s"] == pytest.approx(0.12)


def short_protocol_run(*options: str) -> dict:
    """``load_test.py --protocol --sessions 4 --seconds 12 --hosted --json`` with ``options``: its JSON summary."""
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "load_test.py"),
            "--protocol",
            "--sessions",
            "4",
            "--seconds",
            "12",
            "--hosted",
            "--json",
            *options,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_short_protocol_run_against_its_own_server():
    # Two players, the toy's and the modes', both played in the browser: a Play told to each page, then no tick.
    summary = short_protocol_run("--play-seconds", "3", "--players", "2")
    for key in ("sessions", "errors", "p50_ms", "p95_ms", "max_ms", "server_rss_peak_mib", "server_cpu_cores"):
        assert key in summary
    phase = summary["phases"][0]
    assert summary["sessions"] == 4 and summary["errors"] == 0, phase["error_samples"]
    assert phase["by_request"]["open"]["count"] >= 3 and summary["p50_ms"] > 0
    assert summary["server_rss_peak_mib"] > 50 and summary["server_cpu_cores"] > 0
    # per student: the page process's CPU by request (the counted server's log), the machine's rates
    assert phase["page_cpu"]["by_request"]["open"]["cpu_ms_per_request"] > 1
    assert 0 < phase["page_cpu"]["matched_cpu_s"] <= phase["page_cpu"]["runs_cpu_s"] + 1e-9  # sums in two orders
    assert 0 < phase["page_cores_per_student"] < 1
    assert phase["players"]["sessions"] == 2 and phase["players"]["ticks"] == 0 and phase["players"]["errors"] == 0
    assert phase["by_request"]["button"]["count"] >= 2  # each player's Play, told to its page
    assert summary["rates"]["matmul_gflops"] > 1 and summary["rates"]["elements_g_per_s"] > 0.1


def test_the_slowest_machine_is_emulated_by_the_larger_of_the_two_slow_downs():
    cores, factor = load_test.slowest_machine_cores(dict(matmul_gflops=106.0, elements_g_per_s=7.5), cores=2)
    assert factor == pytest.approx(3.0 / 7.5) and cores == pytest.approx(0.8)
    cores, factor = load_test.slowest_machine_cores(dict(matmul_gflops=132.0, elements_g_per_s=4.0), cores=2)
    assert factor == pytest.approx(0.5) and cores == pytest.approx(1.0)
    assert load_test.slowest_machine_cores(dict(matmul_gflops=50.0, elements_g_per_s=2.0), cores=2) == (2.0, 1.0)
    by_products = load_test.slowest_machine_cores(
        dict(matmul_gflops=132.0, elements_g_per_s=12.0), 2, ("matmul_gflops",)
    )
    assert by_products == pytest.approx((1.0, 0.5))


def test_a_short_protocol_run_through_the_class_servers_proxy_at_the_slowest_machines_speed(haproxy):
    summary = short_protocol_run("--proxy", "--replicas", "2", "--slowest-machine")
    phase = summary["phases"][0]
    assert summary["config"]["proxy"] and summary["sessions"] == 4 and summary["errors"] == 0, phase["error_samples"]
    assert phase["by_request"]["open"]["count"] >= 3
    assert phase["page_cpu"]["by_request"]["open"]["cpu_ms_per_request"] > 1  # both processes' runs counted
    quota = summary["cpu_quota"]
    assert 0 < quota["cores"] <= 2 and quota["factor"] == pytest.approx(quota["cores"] / 2)
