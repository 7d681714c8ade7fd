"""Play / pause / step / reset over a fixed number of frames (precomputed, or computed as they come).

Kept apart from drawing and from Streamlit so that the animation logic is testable directly
(Streamlit's AppTest does not run a fragment's timer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Timers jitter: a run this close to a whole tick after the last advance is the timer's.
TICK_SLACK = 0.9


@dataclass
class Playback:
    frames: int
    frame: int = 0
    playing: bool = False
    last_tick: float = -math.inf  # when a timer run last advanced (time.monotonic())

    def __post_init__(self):
        if self.frames < 1:
            raise ValueError("a playback needs at least one frame")
        self.frame = min(max(int(self.frame), 0), self.frames - 1)

    @property
    def at_end(self) -> bool:
        return self.frame == self.frames - 1

    def play(self) -> None:
        """Start, from the beginning if the last play ran to the end."""
        if self.at_end:
            self.frame = 0
        self.playing = self.frames > 1

    def pause(self) -> None:
        self.playing = False

    def step(self, count: int = 1) -> None:
        """Advance ``count`` frames; stops playing at the last frame."""
        self.frame = min(self.frame + max(int(count), 0), self.frames - 1)
        if self.at_end:
            self.playing = False

    def step_paused(self) -> None:
        """The Step button: pause, then one frame further."""
        self.pause()
        self.step()

    def tick(self, count: int = 1) -> None:
        """One timer tick: advances only while playing."""
        if self.playing:
            self.step(count)

    def tick_due(self, now: float, interval: float) -> bool:
        """Whether a run of the playing panel at time ``now``, its timer set to ``interval`` seconds, advances."""
        return self.playing and now - self.last_tick >= TICK_SLACK * interval

    def timer_run(self, now: float, interval: float, frames: int = 1) -> bool:
        """A run of the playing panel at time ``now``, its timer set to ``interval`` seconds: one tick of
        ``frames`` frames when a tick is due. Besides the timer's, the panel runs when Play is clicked (it
        advances at once), again to start the timer, and whenever another control moves: runs within a tick of
        the last advance do not advance, so no tick counts twice."""
        if not self.tick_due(now, interval):
            return False
        self.last_tick = now
        self.tick(frames)
        return True

    def reset(self) -> None:
        """Back to the first frame, the same start as before."""
        self.frame = 0
        self.playing = False
