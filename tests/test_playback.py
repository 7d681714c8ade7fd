import pytest

from symlab.playback import Playback


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
    pb.play(); pb.tick(3); pb.pause(); pb.tick(3)
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
