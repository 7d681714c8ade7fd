"""The MNIST page's URL parameters: the config's declared controls, within the server's run caps."""

from symlab.specs import controls
from symlab.specs.presets import Presets
from symlab.specs.settings import Hosting, RunLimits
from symlab.specs.urlstate import Param

from .config import SMALLEST_CAPPED_SUBSET, TRAIN_IMAGES, WORK_FIELDS, MnistConfig

# The config fields the page sets, in the link's order.
PAGE_FIELDS = (
    "hidden",
    "depth",
    "method",
    "mi",
    "K",
    "block_size",
    "rebuild_every",
    "epochs",
    "train_subset",
    "batch_size",
    "lr",
    "lr_schedule",
    "sd_fit",
    "prior_scale",
    "init_sd",
    "samples",
    "eval_every",
    "seed",
    "device",
    "estimator",
)
COMPARE = Param("compare", "tokens", "", max_items=8)  # the runs compared, by their public tokens (not their ids)


def caps(limits: RunLimits) -> dict[str, int]:
    """The server's caps on the config's fields. Width and depth: the page allows no more than it would run.
    Epochs are capped in passes over all 60 000 images (:meth:`MnistConfig.work`), so the box allows the cap's
    worth of epochs of a 500-image subset; a launch over the cap is refused with the reason."""
    most = limits.most_work()
    found = {name: getattr(most, work) for name, work in WORK_FIELDS.items()}
    found["epochs"] = most.epochs * (TRAIN_IMAGES // SMALLEST_CAPPED_SUBSET)
    return found


def page_params(hosting: Hosting) -> tuple[Param, ...]:
    return (*controls.url_params(MnistConfig, PAGE_FIELDS, caps=caps(hosting.runs)), COMPARE)


# Each sets every setting of a run (the rest at their defaults, the seed included); one sentence on what to watch.
PRESETS = Presets(
    {
        "Tiny (seconds)": (
            dict(hidden=16, depth=1, epochs=10, subset=2000, lr=0.01, samples=10, init_sd=0.05),
            "160 steps at a rate of 0.01, under a second of training: launch MFVI and SGM together, and watch both "
            "reach about 87 % with the same numbers, their closest units about 90 nats apart.",
        ),
        "Quick look (a minute)": (
            dict(hidden=64, depth=1, epochs=3, subset=10_000, samples=10, init_sd=0.05),
            "A small net on 10 000 images: compare the two methods' accuracy and ELBO curves epoch by epoch.",
        ),
        "Paper width 400": (
            dict(hidden=400, depth=1, epochs=10, subset=0, samples=10, init_sd=0.05),
            "The full training set for 10 epochs: as σ opens to its optimum (median 0.98) MFVI reaches about 94 % and "
            "the runs table says 'no' under converged; watch the closest two units come within a few nats.",
        ),
        "Wide (1024 units)": (
            dict(hidden=1024, depth=1, epochs=3, subset=0, samples=10, init_sd=0.05),
            "The width where the paper expects SGM's gain to be largest: check the 'I active' column to see "
            "whether its extra term ever had a gradient.",
        ),
        "σ by curvature (converges)": (
            dict(hidden=64, depth=1, epochs=250, subset=2000, every=62, lr=0.003, samples=10, init_sd=0.05),
            "4 000 steps on 2 000 images with σ at the ELBO's stationary point every step: the runs table says "
            "'converged at epoch …'; compare it with the next preset's run.",
        ),
        "σ by Adam (the earlier recipe)": (
            dict(
                hidden=64,
                depth=1,
                epochs=250,
                subset=2000,
                every=62,
                lr=0.001,
                schedule="constant",
                sdfit="adam",
                samples=10,
                init_sd=0.05,
            ),
            "The same run with σ by Adam at a constant 10⁻³: watch the ELBO still climbing at the end and the runs "
            "table saying 'no' under converged.",
        ),
        "Where symmetrisation acts (500 images, width 1024)": (
            dict(
                hidden=1024,
                depth=1,
                epochs=1000,
                subset=500,
                every=250,
                lr=0.003,
                samples=10,
                init_sd=0.05,
                method="sgm",
                mi="blocks",
                block=4,
            ),
            "The study's cell with the largest bound gain (about 6 minutes a run here): launch the MFVI/SGM pair and "
            "watch SGM's closest units stay about 3 nats apart against MFVI's 1, while 965 of MFVI's 1 024 units sit at "
            "the prior and the accuracies match.",
        ),
    },
    keeps={"compare": "the runs the Results tab compares, which are runs, not settings"},
)
