"""The MNIST page's URL parameters: the config's declared controls, within the server's run caps."""

from symlab.specs import controls
from symlab.specs.settings import Hosting, RunLimits
from symlab.specs.urlstate import Param

from .experiment import WORK_FIELDS, MnistConfig

# The config fields the page sets, in the link's order.
PAGE_FIELDS = ("hidden", "depth", "method", "mi", "K", "block_size", "rebuild_every", "epochs", "train_subset",
               "batch_size", "lr", "prior_scale", "init_sd", "samples", "seed", "device", "estimator")
COMPARE = Param("compare", "floats", "", 1, 1e9, max_items=8)  # the runs compared, by id


def caps(limits: RunLimits) -> dict[str, int]:
    """The server's caps on the config's fields: the page allows no more than it would run."""
    most = limits.most_work()
    return {name: getattr(most, work) for name, work in WORK_FIELDS.items()}


def page_params(hosting: Hosting) -> tuple[Param, ...]:
    return (*controls.url_params(MnistConfig, PAGE_FIELDS, caps=caps(hosting.runs)), COMPARE)
