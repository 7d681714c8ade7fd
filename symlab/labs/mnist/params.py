"""The MNIST page's URL parameters, within the server's run caps."""

from symlab.hosting import Hosting
from symlab.urlstate import Param

from .experiment import DEVICES, MAX_BLOCK_SIZE, METHODS, MI_ESTIMATORS, MnistConfig

DEFAULTS = MnistConfig()


def page_params(hosting: Hosting) -> tuple[Param, ...]:
    limits = hosting.runs
    return (
        Param("hidden", "int", DEFAULTS.hidden, 1, limits.max_hidden),
        Param("depth", "int", DEFAULTS.depth, 1, limits.max_depth),
        Param("method", "choice", DEFAULTS.method, choices=METHODS),
        Param("mi", "choice", DEFAULTS.mi, choices=MI_ESTIMATORS),
        Param("K", "int", DEFAULTS.K, 2, 256),
        Param("block", "int", DEFAULTS.block_size, 2, MAX_BLOCK_SIZE),
        Param("rebuild", "int", DEFAULTS.rebuild_every, 1, 10_000),
        Param("epochs", "int", DEFAULTS.epochs, 1, limits.max_epochs),
        Param("subset", "int", DEFAULTS.train_subset, 0, 60_000),
        Param("batch", "int", DEFAULTS.batch_size, 8, 2048),
        Param("lr", "float", DEFAULTS.lr, 1e-5, 0.1),
        Param("prior", "float", DEFAULTS.prior_scale, 0.01, 10.0),
        Param("init_sd", "float", DEFAULTS.init_sd, 1e-5, 1.0),
        Param("samples", "int", DEFAULTS.samples, 1, 100),
        Param("seed", "int", DEFAULTS.seed, 0, 100_000),
        Param("device", "choice", DEFAULTS.device, choices=DEVICES),
        Param("compare", "floats", "", 1, 1e9, max_items=8),
    )
