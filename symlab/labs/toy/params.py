"""The tractable-BNN page's URL parameters."""

from symlab.urlstate import Param

from . import experiment as toy

DEFAULTS = toy.ToyConfig()


def page_params(hosting=None) -> tuple[Param, ...]:
    return (
        Param("alpha", "float", DEFAULTS.alpha, 0.0, 3.0, step=0.05),
        Param("noise", "float", DEFAULTS.noise, 0.05, 2.0, step=0.05),
        Param("n", "int", DEFAULTS.n_train, 2, 500),
        Param("prior", "float", DEFAULTS.prior_scale, 0.1, 5.0, step=0.1),
        Param("mi", "choice", DEFAULTS.mi, choices=toy.MI_ESTIMATORS),
        Param("K", "int", DEFAULTS.K, 2, 64),
        Param("lr", "float", DEFAULTS.lr, 0.001, 0.2, step=0.001),
        Param("batch", "int", DEFAULTS.batch_size, 1, 500),
        Param("init", "choice", DEFAULTS.init, choices=toy.INITS),
        Param("seed", "int", DEFAULTS.seed, 0, 100_000),
        Param("alphas", "floats", ", ".join(f"{a:g}" for a in toy.DEFAULT_TABLE_ALPHAS), 0.0, 3.0),
        Param("seeds", "int", 5, 1, 10),
    )
