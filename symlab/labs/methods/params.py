"""The posterior-approximation page's URL parameters: the comparison's declared controls, and its HMC reference's."""

from dataclasses import asdict

from symlab.specs import controls
from symlab.specs.hmc import HmcConfig
from symlab.specs.presets import Presets
from symlab.specs.urlstate import Param

from .config import SAMPLER, MethodsConfig

PAGE_FIELDS = (
    "architecture",
    "width",
    "reference",
    "samples",
    "modes",
    "epochs",
    "train_size",
    "test_size",
    "removal",
    "hmc",
    "seed",
)
SAMPLER_FIELDS = tuple(controls.declared(HmcConfig))
RUN = Param("run", "int", 0, 0, 10**9)  # the finished run whose results are shown (0: the latest for these settings)


def page_params(hosting=None) -> tuple[Param, ...]:
    return (
        *controls.url_params(MethodsConfig, PAGE_FIELDS),
        *controls.url_params(HmcConfig, SAMPLER_FIELDS, defaults=asdict(SAMPLER)),
        RUN,
    )


def config_from(values) -> MethodsConfig:
    """The comparison a page's ``values`` (keyed by URL name) describe."""
    sampler = HmcConfig(**controls.config_values(HmcConfig, values, SAMPLER_FIELDS))
    return MethodsConfig(**controls.config_values(MethodsConfig, values, PAGE_FIELDS), sampler=sampler).validate()


# Each sets every setting of a comparison (the rest at their defaults, the seed included); one sentence on what to
# watch.
PRESETS = Presets(
    {
        "Quick (a few minutes)": (
            dict(),
            "The default: 100 reference convnets, 50 samples per method; compare each method's one-mode and ten-mode rows "
            "in the MMD columns.",
        ),
        "The MNIST lab's MLP": (
            dict(architecture="mlp", width=16),
            "The same comparison on a 784-16-10 MLP, where the hidden layer holds 99 % of the weights and so of the MMD.",
        ),
        "Sorted by the largest weight": (
            dict(removal="max"),
            "Symmetry removal by each unit's largest incoming weight instead of its first: see whether the MMD without "
            "symmetries, and the ranking, move.",
        ),
        "Against HMC (about an hour)": (
            dict(hmc=True),
            "The default with a full-batch HMC reference beside the checkpoints: see whether the two references rank "
            "the methods alike, and whether HMC's raw R̂ falls to one once the symmetries are removed.",
        ),
        "Longer (half an hour)": (
            dict(reference=200, samples=100, epochs=5, train=20_000, test=5000),
            "Nearer the paper's counts: 200 reference checkpoints and the paper's 100 samples per method, on 20 000 "
            "images; see whether the ranking and the SGM rows hold.",
        ),
    },
    keeps={"run": "the run whose results are shown, which is a run, not a setting"},
)
