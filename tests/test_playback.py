import pytest

from symlab.serving.playback import Playback


def test_play_tick_to_the_end_stops():
    pb = Playback(frames=5)
    pb.tick()
    assert pb.frame == 0  # paused: a tick does nothing
    pb.play()
    for _ in range(10):
        pb.tick()
    assert pb.frame == 4 and pb.at_end and not pb.playing


def test_pause_step_reset():
    pb = Playback(frames=10)
    pb.play()
    pb.tick(3)
    pb.pause()
    pb.tick(3)
    assert pb.frame == 3 and not pb.playing
    pb.step()
    assert pb.frame == 4
    pb.reset()
    assert pb.frame == 0 and not pb.playing


def test_play_after_the_end_restarts_from_the_same_start():
    pb = Playback(frames=3, frame=2)
    pb.play()
    assert pb.frame == 0 and pb.playing


def test_single_frame_never_plays_and_bad_sizes_fail():
    pb = Playback(frames=1)
    pb.play()
    assert not pb.playing
    with pytest.raises(ValueError):
        Playback(frames=0)


def test_the_timer_advances_once_a_tick_whatever_else_reruns_the_panel():
    pb = Playback(frames=10)
    assert not pb.timer_run(0.0, 0.5)  # paused: no run advances
    pb.play()
    assert pb.timer_run(100.0, 0.5) and pb.frame == 1  # Play's own run: at once
    assert not pb.timer_run(100.05, 0.5) and pb.frame == 1  # the rerun that starts the timer
    assert not pb.timer_run(100.3, 0.5) and pb.frame == 1  # another control moved
    assert pb.timer_run(100.46, 0.5) and pb.frame == 2  # the timer, a little early (timers jitter)
    assert pb.timer_run(101.0, 0.5) and pb.frame == 3


def test_a_step_clicked_while_a_tick_is_pending_advances_once():
    pb = Playback(frames=10)
    pb.play()
    pb.timer_run(0.0, 0.5)
    pb.step_paused()  # Step while playing: pause, one frame further
    assert pb.frame == 2 and not pb.playing
    assert not pb.timer_run(0.5, 0.5) and pb.frame == 2  # the tick that was pending does nothing


def test_timer_runs_stop_at_the_last_frame():
    pb = Playback(frames=3)
    pb.play()
    for now in range(5):
        pb.timer_run(float(now), 0.5)
    assert pb.frame == 2 and not pb.playing
