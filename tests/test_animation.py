"""Animations encoded for the browser (symlab.specs.animation): what the browser rebuilds is what was encoded."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symlab.specs import animation


def frame(curve_steps: int, ellipse_x: float, gone: bool = False) -> dict:
    steps = np.arange(curve_steps) * 20
    frame = {
        "chart": {
            "lines": {
                "curve": {"x": steps, "y": np.sin(steps / 100.0)},
                "ellipse": {"cx": [ellipse_x, ellipse_x / 3, -ellipse_x], "cy": [0.5] * 3, "part": np.arange(3)},
            },
            "image": {"": {"url": ["data:,"]}},
        }
    }
    if not gone:
        frame["chart"]["lines"]["modes"] = {"cx": [1.0, -1.0], "cy": [-1.0, 1.0]}
    return frame


def test_each_series_is_sent_as_it_changed():
    frames = [frame(1, 0.1), frame(2, 0.2), frame(2, 0.2), frame(3, 0.3, gone=True)]
    document = animation.decode(animation.encode(frames, list("abcd"), list("ABCD")))
    first, grown, same, last = document["frames"]
    assert set(first["chart"]["lines"]) == {"curve", "ellipse", "modes"} and "image" in first["chart"]
    assert grown["chart"]["lines"]["curve"] == {"append": {"x": [20], "y": [0.1987]}}  # the new row alone
    # The changed column alone, as whole steps of its rounding (4 decimals): 0.1 → 0.2 is 1000 of them (the first
    # row's; each further row sends its difference from the row before: steps 1000, 334, -1000).
    assert grown["chart"]["lines"]["ellipse"] == {"add": {"cx": {"d": 4, "v": [1000, -666, -1334]}}}
    assert "image" not in grown["chart"] and "modes" not in grown["chart"]["lines"]  # unchanged: not sent
    assert same == {}
    assert last["chart"]["lines"]["modes"] is None  # gone
    assert document["labels"] == list("abcd") and document["captions"] == list("ABCD")


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 6), st.floats(-1e3, 1e3, allow_nan=False), st.booleans()), min_size=1, max_size=8)
)
def test_the_browsers_rebuild_of_every_frame_is_the_frame_rounded(specs):
    """Whatever the changes (grown, shrunk, changed, gone), every frame rebuilt from the changes before it is that
    frame, to the encoding's significant digits."""
    frames = [frame(n, x, gone) for n, x, gone in specs]
    document = animation.decode(animation.encode(frames, [""] * len(frames), [""] * len(frames)))
    for k, expected in enumerate(frames):
        rebuilt = animation.rows_at(document, k)["chart"]["lines"]
        assert set(rebuilt) == set(expected["chart"]["lines"])
        for label, columns in expected["chart"]["lines"].items():
            for name, values in columns.items():
                assert rebuilt[label][name] == animation.rounded(np.asarray(values)), (k, label, name)


@pytest.mark.parametrize(
    "values, expected",
    [
        ([0.123456, 1.0], [0.123, 1.0]),  # 4 significant digits of the largest
        ([0.123456, 0.5], [0.1235, 0.5]),
        ([5e-324], [0.0]),  # a denormal: rounded, not an overflow
        ([1234.567, 1.0], [1235.0, 1.0]),
        ([12345.6], [12346]),
        ([np.nan, 0.5], [None, 0.5]),
        ([0.0, 0.0], [0.0, 0.0]),
        (np.array([3, 4]), [3, 4]),  # whole numbers as they are
        ([1e300, 1.0], [1e300, 1.0]),  # past 2⁵³, whole numbers stay floats (an int64 would wrap)
        ([np.inf, 2.0], [None, 2.0]),
    ],
)
def test_numbers_keep_four_significant_digits_of_their_largest(values, expected):
    assert animation.rounded(values) == expected


def test_an_animation_needs_frames_with_labels_and_captions():
    with pytest.raises(ValueError, match="at least one frame"):
        animation.encode([], [], [])
    with pytest.raises(ValueError, match="label and a caption"):
        animation.encode([frame(1, 0.0)], ["a", "b"], ["a"])


def test_the_same_frames_have_the_same_identity_and_other_frames_another():
    one = animation.encode([frame(1, 0.1)], ["a"], ["A"])
    assert one == animation.encode([frame(1, 0.1)], ["a"], ["A"])
    assert one.identity != animation.encode([frame(1, 0.2)], ["a"], ["A"]).identity
