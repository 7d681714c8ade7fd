"""The MNIST page's URL parameters: the config's declared controls, within the server's run caps."""

from symlab.specs import controls
from symlab.specs.presets import Presets
from symlab.specs.settings import Hosting, RunLimits
from symlab.specs.urlstate import Param

from .experiment import SMALLEST_CAPPED_SUBSET, TRAIN_IMAGES, WORK_FIELDS, MnistConfig

# The config fields the page sets, in the link's order.
PAGE_FIELDS = ("hidden", "depth", "method", "mi", "K", "block_size", "rebuild_every", "epochs", "train_subset",
               "batch_size", "lr", "lr_schedule", "sd_fit", "prior_scale", "init_sd", "samples", "eval_every", "seed",
               "device", "estimator")
COMPARE = Param("compare", "floats", "", 1, 1e9, max_items=8)  # the runs compared, by id


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
PRESETS = Presets({
    "Tiny (seconds)": (
        dict(hidden=16, depth=1, epochs=2, subset=2000, samples=10, init_sd=0.05),
        "A run takes seconds: launch MFVI and SGM together and watch them move through the queue."),
    "Quick look (a minute)": (
        dict(hidden=64, depth=1, epochs=3, subset=10_000, samples=10, init_sd=0.05),
        "A small net on 10 000 images: compare the two methods' accuracy and ELBO curves epoch by epoch."),
    "Paper width 400": (
        dict(hidden=400, depth=1, epochs=10, subset=0, samples=10, init_sd=0.05),
        "The full training set: MFVI reaches 97.8 % test accuracy in 10 epochs; watch the closest two units draw "
        "nearer (in nats) as σ grows, epoch after epoch."),
    "Wide (1024 units)": (
        dict(hidden=1024, depth=1, epochs=3, subset=0, samples=10, init_sd=0.05),
        "The width where the paper expects SGM's gain to be largest: check the 'I active' column to see "
        "whether its extra term ever had a gradient."),
    "Where symmetrisation acts (σ₀ 0.2)": (
        dict(hidden=256, depth=1, epochs=5, subset=20_000, samples=10, init_sd=0.2, method="sgm", mi="blocks",
             block=2),
        "A wide initial σ puts the closest units ~15 nats apart: the block term has a gradient at every step, yet "
        "I_H stays within 1 % of log|H|; launch the MFVI/SGM pair and compare their accuracy."),
}, keeps={"compare": "the runs the Results tab compares, which are runs, not settings"})
