"""The symmetry explorer's URL parameters."""

from symlab.labs.toy import experiment as toy
from symlab.lib import symmetry
from symlab.urlstate import Param

from . import experiment as symmetry_lab

PARTS = {
    "fig1": "The doubled mode (Fig. 1)",
    "mass": "Min-mass",
    "proximity": "Mode proximity",
    "quality": "Posterior quality (MMD)",
    "training": "Permutations in training",
}
PERCEPTRON = symmetry_lab.PerceptronConfig()
MLP = symmetry_lab.MlpConfig()
PROXIMITY = symmetry_lab.ProximityConfig()
TOY = toy.ToyConfig()


def page_params(hosting=None) -> tuple[Param, ...]:
    return (
        Param("part", "choice", "fig1", choices=tuple(PARTS)),
        Param("nets", "int", PERCEPTRON.nets, 100, 10_000),
        Param("epochs", "int", PERCEPTRON.epochs, 1, 30),
        Param("lr", "float", PERCEPTRON.lr, 0.1, 5.0, step=0.1),
        Param("sep", "float", PERCEPTRON.separation, 1.0, 4.0, step=0.25),
        Param("max_width", "choice", "4096", choices=tuple(str(2**k) for k in range(3, 14))),
        Param("d_in", "int", PROXIMITY.d_in, 1, 16),
        Param("d_out", "int", PROXIMITY.d_out, 1, 4),
        Param("weights", "choice", PROXIMITY.weights, choices=symmetry_lab.PROXIMITY_WEIGHTS),
        Param("alpha", "float", TOY.alpha, 0.0, 3.0, step=0.05),
        Param("n", "int", TOY.n_train, 2, 500),
        Param("width", "int", MLP.width, 2, 256),
        Param("depth", "int", MLP.depth, 1, 3),
        Param("sgd_lr", "float", MLP.lr, 0.005, 1.0, step=0.005),
        Param("steps", "int", MLP.steps, 100, 3000),
        Param("schedule", "choice", MLP.schedule, choices=symmetry_lab.SCHEDULES),
        Param("key", "choice", MLP.sort_key, choices=symmetry.SORT_KEYS),
        Param("seed", "int", 0, 0, 100_000),
    )
