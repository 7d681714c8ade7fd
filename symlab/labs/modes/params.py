"""The mode-interpolation page's URL parameters."""

from symlab.urlstate import Param


def page_params(hosting=None) -> tuple[Param, ...]:
    return (
        Param("alpha", "float", 3.0, 0.0, 20.0, step=0.05),
        Param("sigma", "float", 1.0, 0.1, 2.0, step=0.05),
        Param("dim", "int", 2, 1, 50),
        Param("forward", "bool", False),
    )
