"""Play / pause / step / reset over a fixed sequence of precomputed frames.

Kept apart from drawing and from Streamlit so that the animation logic is testable directly
(Streamlit's AppTest does not run fragments).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Playback:
    frames: int
    frame: int = 0
    playing: bool = False

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

    def tick(self, count: int = 1) -> None:
        """One timer tick: advances only while playing."""
        if self.playing:
            self.step(count)

    def reset(self) -> None:
        """Back to the first frame, the same start as before."""
        self.frame = 0
        self.playing = False
