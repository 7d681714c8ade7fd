"""The alignment page's URL parameters: the declared controls of :class:`AlignConfig` it shows, and its view."""

from symlab.specs import controls
from symlab.specs.presets import Presets
from symlab.specs.urlstate import SURFACE_VIEW, Param

from .config import AlignConfig

# The settings the page shows (the command line has all of AlignConfig's), in the sidebar's order.
FIELDS = ("task", "width", "depth", "train_size", "noise", "steps", "lr", "prior_scale", "samples", "starts")
# The shared server trains and aligns while a visitor waits, and keeps each link's data and posteriors in
# memory: the page stays below the declared ranges (the widgets' help says so); the command line does not.
CAPS = {"width": 128, "train_size": 20_000, "steps": 3000, "samples": 64, "starts": 64}
ORDERS = {"own": "in its own order", "aligned": "in the aligned order"}
ORDER = Param("order", "choice", "own", choices=tuple(ORDERS))  # a view of the assignments, not a setting
SOURCES = {"trained": "trained here", "files": "your files"}
SOURCE = Param("source", "choice", "trained", choices=tuple(SOURCES))  # the pair: trained by the page, or uploaded


def page_params(hosting=None) -> tuple[Param, ...]:
    return (
        SOURCE,
        *controls.url_params(AlignConfig, FIELDS, caps=CAPS),
        ORDER,
        *controls.url_params(AlignConfig, ["seed"]),
        SURFACE_VIEW,
    )


def page_config(values: dict) -> AlignConfig:
    """The page's config from its controls' values (the URL's, or the widgets')."""
    return AlignConfig(**controls.config_values(AlignConfig, values, (*FIELDS, "seed"))).validate()


# Each sets its controls, every other from the defaults (the seed included); one sentence on what to watch.
PRESETS = Presets(
    {
        "Half moons, two hidden layers": (
            {},
            "Before alignment the middle of the path forgets the task (its loss rises ~0.4 nats); after, the path is flat.",
        ),
        "Narrow layers (8 units)": (
            dict(width=8),
            "With few units each permutation copy is coarse: alignment lowers the barrier but can leave a bump.",
        ),
        "One hidden layer": (
            dict(depth=1, width=16),
            "One layer, one linear assignment: the descent is exact, and the barrier is gone.",
        ),
        "Three hidden layers": (
            dict(depth=3),
            "Three assignments solved in turn, a few sweeps: the barrier falls below half its height, on most seeds to near 0.",
        ),
        "Little data, wide posteriors": (
            dict(train=100),
            "With 100 points the standard deviations are large: W₂ alignment and weight matching can pick different units.",
        ),
        "MNIST subset": (
            dict(task="mnist", width=64, depth=2, train=10_000, steps=1500, lr=0.003, samples=16),
            "Digits instead of moons: the unaligned path rises 0.7–0.9 nats above its ends, the aligned one stays flat.",
        ),
    },
    keeps={
        "order": "how the assignment heat maps order the units, a way of looking at the same result",
        "surface": "the 3-D loss landscape, a way of looking at the same pair (computed once asked for)",
    },
)
