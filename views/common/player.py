"""Play / pause / step / reset over a chart's frames, in a fragment that ticks while playing."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

import streamlit as st

from symlab.serving import pace
from symlab.serving.playback import Playback
from views.common.binding import server_settings


def frame_player(
    name: str,
    state_key: Hashable,
    frames: int,
    start: int,
    tick_seconds: float,
    label: Callable[[int], str],
    draw: Callable[[int, dict], None],
    play_help: str | None = None,
    reset_help: str | None = None,
    follow: Callable[[int], bool] | None = None,
) -> None:
    """Play / pause / step / reset over ``frames`` frames, in a fragment that ticks every ``tick_seconds`` (at
    least the server's minimum) while playing: the buttons (keys ``{name}.play``, ``.pause``, ``.step``,
    ``.reset``), a progress bar captioned ``label(frame)``, then ``draw(frame, chart_config)``. Frames are
    precomputed, or computed as they come by ``follow(frame)``, called first on every run (live training:
    train up to the frame); it returns False when playing cannot go on. The position is kept per session and
    starts over at ``start`` when ``state_key`` changes (other settings)."""
    if st.session_state.get(f"{name}.playback_key") != state_key:
        st.session_state[f"{name}.playback_key"] = state_key
        st.session_state[f"{name}.playback"] = Playback(frames, frame=start)
    playback = st.session_state[f"{name}.playback"]
    tick = max(tick_seconds, server_settings().live.min_tick_seconds)
    paced = st.session_state.setdefault(f"{name}.pace", pace.Pace())
    timer_was_on = st.session_state.get(f"{name}.timer_on", False)  # before this run of the whole page
    if playback.playing and not timer_was_on:  # the timer starts: at the pace the server's load asks for
        paced.start(pace.PROCESS_LOAD.cores(), time.monotonic())
    st.session_state[f"{name}.timer_on"] = playback.playing
    interval = tick * paced.slowdown

    # The buttons belong to the whole page's run, not the fragment's: a click reruns the page once (which starts or
    # stops the timer), where a button of the fragment would rerun the fragment, then the page.
    player_buttons(name, playback, play_help, reset_help)

    @st.fragment(run_every=interval if playback.playing else None)
    def panel():
        now = time.monotonic()
        due = playback.tick_due(now, interval)
        if due:  # the timer's run (a person's is an interaction: it waits for none)
            pace.INTERACTIONS.wait()
            now = time.monotonic()
        playback.timer_run(now, interval, paced.slowdown)
        if follow is not None and not follow(playback.frame):
            playback.pause()
        st.progress(playback.frame / max(frames - 1, 1), text=label(playback.frame))
        if playback.playing and paced.slowdown > 1:
            st.caption(
                f"The server is busy with the class: this animation redraws every {interval:g} s, "
                f"{paced.slowdown} frames at a time, so that everyone's clicks come first."
            )
        draw(playback.frame, {"displayModeBar": False} if playback.playing else {})
        repaced = due and paced.update(pace.PROCESS_LOAD.cores(), now)
        if playback.playing != timer_on or (playback.playing and repaced):
            st.rerun()  # stop or retime the timer (and show the buttons it leaves): it is fixed where defined

    timer_on = playback.playing
    panel()


def player_buttons(name: str, playback: Playback, play_help: str | None, reset_help: str | None) -> None:
    cols = st.columns(4)
    cols[0].button(
        "Play",
        icon=":material/play_arrow:",
        on_click=playback.play,
        key=f"{name}.play",
        disabled=playback.playing,
        width="stretch",
        help=play_help,
    )
    cols[1].button(
        "Pause",
        icon=":material/pause:",
        on_click=playback.pause,
        key=f"{name}.pause",
        disabled=not playback.playing,
        width="stretch",
    )
    cols[2].button(
        "Step",
        icon=":material/skip_next:",
        on_click=playback.step_paused,
        key=f"{name}.step",
        disabled=playback.at_end,
        width="stretch",
    )
    cols[3].button(
        "Reset",
        icon=":material/replay:",
        on_click=playback.reset,
        key=f"{name}.reset",
        width="stretch",
        help=reset_help,
    )
