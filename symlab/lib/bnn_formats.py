"""Mean-field posteriors as BNN libraries save them, renamed to SymLab's keys.

Each library keeps a linear layer's Gaussian as a mean and an unconstrained σ parameter, under names of its
own, and maps that parameter to σ by a transform of its own. :data:`FORMATS` lists them as data, each read
from the library's source (the version and file:line beside it; the saved file does not say which version
wrote it). :func:`detect` tells which library wrote a ``state_dict`` by its σ parameters' names, which no two
share; :func:`to_symlab` puts the means under ``<layer>weight`` / ``<layer>bias`` and σ under
``sd.<layer>weight`` / ``sd.<layer>bias``, in the file's order, for :mod:`symlab.lib.weights` to check like
any posterior of SymLab's own. σ is computed in float64, so a float32 file loses nothing to the transform.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import torch

from symlab.lib.options import BNN_LIBRARIES

SD_PREFIX = "sd."  # SymLab's standard deviations, beside the means (symlab.lib.weights.SD_PREFIX)
NEEDS_BOTH = "a mean-field posterior needs a mean and a σ parameter for every weight and bias"
LAYER = "{layer}"  # in a key template: the layer's prefix, "0.", "fc1." or "" (a bare layer)


class FormatError(ValueError):
    """A library's file that cannot be renamed; the message names the keys."""


@dataclass(frozen=True)
class BnnFormat:
    """How one library names a linear layer's posterior, and turns its σ parameter into σ."""

    name: str
    weight: tuple[str, str]  # key templates of the weight's (mean, σ parameter)
    bias: tuple[str, str]  # the same for the bias, absent from a layer without one
    transform: str  # a key of SIGMA_TRANSFORMS
    parameter: str  # the σ parameter's name in the formula shown back
    ignored: tuple[str, ...] = ()  # other tensors its layers save: priors, noise, copies

    @property
    def formula(self) -> str:
        return f"σ = {self.transform}({self.parameter})"

    @property
    def library(self) -> str:
        """Where a network came from, as :class:`symlab.lib.weights.Network` carries it."""
        return f"{self.name} posterior ({self.formula})"

    @property
    def signature(self) -> tuple[str, str]:
        """The σ parameters' templates: a key matching one says the file is this library's."""
        return self.weight[1], self.bias[1]


SIGMA_TRANSFORMS = {
    # log(1 + e^x) as logaddexp(0, x): no overflow to inf for a large x, no rounding to 0 for a very negative one.
    "softplus": lambda parameter: torch.logaddexp(torch.zeros_like(parameter), parameter),
    "exp": torch.exp,
}

FORMATS = (
    # bayesian-torch 0.5.0, LinearReparameterization and LinearFlipout alike: σ = log1p(exp(ρ)) in
    # bayesian_torch/layers/variational_layers/linear_variational.py:160,172 and
    # bayesian_torch/layers/flipout_layers/linear_flipout.py:149,161. The prior and noise buffers are not saved
    # by 0.5.0 (persistent=False, linear_variational.py:90-112) but are by a state_dict taken otherwise.
    BnnFormat(
        "bayesian-torch",
        ("{layer}mu_weight", "{layer}rho_weight"),
        ("{layer}mu_bias", "{layer}rho_bias"),
        "softplus",
        "ρ",
        ignored=(
            "{layer}eps_weight",
            "{layer}prior_weight_mu",
            "{layer}prior_weight_sigma",
            "{layer}eps_bias",
            "{layer}prior_bias_mu",
            "{layer}prior_bias_sigma",
        ),
    ),
    # blitz-bayesian-pytorch 0.2.8, BayesianLinear: σ = log1p(exp(ρ)) in blitz/modules/weight_sampler.py:32. Its
    # samplers hold the same mu and rho again, sharing their storage, and a noise buffer eps_w
    # (blitz/modules/linear_bayesian_layer.py:59,64; weight_sampler.py:12-14). A layer made with bias=False still
    # saves a bias_mu and bias_rho it never uses (linear_bayesian_layer.py:62-63,81-88): the file cannot say so.
    BnnFormat(
        "BLiTZ",
        ("{layer}weight_mu", "{layer}weight_rho"),
        ("{layer}bias_mu", "{layer}bias_rho"),
        "softplus",
        "ρ",
        ignored=(
            "{layer}weight_sampler.mu",
            "{layer}weight_sampler.rho",
            "{layer}weight_sampler.eps_w",
            "{layer}bias_sampler.mu",
            "{layer}bias_sampler.rho",
            "{layer}bias_sampler.eps_w",
        ),
    ),
    # torchbnn 1.2, BayesLinear: σ = exp(log σ) in torchbnn/modules/linear.py:86,92; weight_eps and bias_eps are the
    # noise freeze() fixes (linear.py:71-74).
    BnnFormat(
        "torchbnn",
        ("{layer}weight_mu", "{layer}weight_log_sigma"),
        ("{layer}bias_mu", "{layer}bias_log_sigma"),
        "exp",
        "log σ",
        ignored=("{layer}weight_eps", "{layer}bias_eps"),
    ),
    # A Pyro AutoNormal guide's state_dict(), pyro-ppl 1.9.2: PyroModule keeps each PyroParam unconstrained, as
    # <name>_unconstrained (pyro/nn/module.py:734). The locs are real, the means of weights under a prior with real
    # support (a Normal, as BNNs have: no transform); the scales' constraint is
    # AutoNormal.scale_constraint = softplus_positive (pyro/infer/autoguide/guides.py:447), whose bijection is
    # torch.nn.functional.softplus (pyro/distributions/transforms/__init__.py:142-145, transforms/softplus.py:28).
    BnnFormat(
        "Pyro AutoNormal",
        ("locs.{layer}weight_unconstrained", "scales.{layer}weight_unconstrained"),
        ("locs.{layer}bias_unconstrained", "scales.{layer}bias_unconstrained"),
        "softplus",
        "scale_unconstrained",
    ),
)
if tuple(fmt.name for fmt in FORMATS) != BNN_LIBRARIES:  # the names the command line's help gives, without torch
    raise ImportError(f"symlab.lib.options.BNN_LIBRARIES must list {[fmt.name for fmt in FORMATS]}")

# Said where the reader lists the formats: what of Pyro's is read, and why its param store is not.
UNREADABLE = (
    "for Pyro, the AutoNormal guide's state_dict(): the param store's save() pickles its constraint "
    "objects, which cannot be loaded without running code"
)


def detect(tensors: dict) -> BnnFormat | None:
    """The library whose σ parameters the file holds; None for none (a plain or SymLab file);
    :class:`FormatError` for a file mixing two, or holding a library's means with no σ parameter at all."""
    found = {fmt: key for fmt in FORMATS for key in _matching(tensors, fmt.signature)[:1]}
    if len(found) > 1:
        mixed = " and ".join(f"{fmt.name} ({key!r})" for fmt, key in found.items())
        raise FormatError(f"mixes the posteriors of {mixed}: a file must come from one library")
    if not found:
        _refuse_means_alone(tensors)
    return next(iter(found), None)


def to_symlab(tensors: dict, fmt: BnnFormat) -> dict[str, torch.Tensor]:
    """``tensors`` under SymLab's keys: each layer's means and their σ, in the file's layer order. Tensors that are
    none of ``fmt``'s come through unchanged, for the reader to refuse; nn.Linear or SymLab keys beside the
    library's are refused here (a file of two formats)."""
    templates = (*fmt.weight, *fmt.bias)
    claimed = set(_matching(tensors, templates + fmt.ignored))
    _refuse_plain_keys([key for key in tensors if key not in claimed], fmt)
    converted = {}
    for layer in _layers(tensors, templates):
        for part, (mean_template, sigma_template) in (("weight", fmt.weight), ("bias", fmt.bias)):
            mean_key, sigma_key = mean_template.format(layer=layer), sigma_template.format(layer=layer)
            if mean_key in tensors or sigma_key in tensors:
                converted[layer + part] = _present(tensors, mean_key, sigma_key)
                converted[SD_PREFIX + layer + part] = _sigma(_present(tensors, sigma_key, mean_key), sigma_key, fmt)
    converted.update((key, value) for key, value in tensors.items() if key not in claimed)
    return converted


def _matching(tensors: dict, templates) -> list[str]:
    return [key for key in tensors if any(_pattern(template).fullmatch(key) for template in templates)]


@functools.cache
def _pattern(template: str) -> re.Pattern:
    """A key template as a regular expression; the layer's prefix is empty or ends in a dot."""
    before, after = template.split(LAYER)
    return re.compile(f"{re.escape(before)}(?P<layer>(?:.*\\.)?){re.escape(after)}")


def _layers(tensors: dict, templates) -> list[str]:
    """The layers' prefixes, in the order their first tensors come in the file (a state_dict's is the module's)."""
    prefixes: dict[str, None] = {}  # a dict for its order
    for key in tensors:
        for template in templates:
            if match := _pattern(template).fullmatch(key):
                prefixes.setdefault(match["layer"], None)
    return list(prefixes)


def _refuse_plain_keys(keys, fmt: BnnFormat) -> None:
    plain = [key for key in keys if key.startswith(SD_PREFIX) or re.fullmatch(r"(.*\.)?(weight|bias)", key)]
    if plain:
        raise FormatError(
            f"mixes nn.Linear or SymLab keys ({', '.join(map(repr, plain[:4]))}) with a {fmt.name} "
            "posterior: a file must come from one library"
        )


def _refuse_means_alone(tensors: dict) -> None:
    """A library's means with none of its σ parameters: name the σ each library would have saved beside them."""
    partners: dict[str, list[str]] = {}
    for fmt in FORMATS:
        for mean_template, sigma_template in (fmt.weight, fmt.bias):
            for key in _matching(tensors, (mean_template,))[:1]:
                match = _pattern(mean_template).fullmatch(key)
                assert match is not None  # _matching kept only the keys it matches
                layer = match["layer"]
                partners.setdefault(key, []).append(f"{fmt.name}: {sigma_template.format(layer=layer)!r}")
    if partners:
        key, expected = next(iter(partners.items()))
        raise FormatError(f"{key!r} has no σ parameter beside it ({', '.join(expected)}): {NEEDS_BOTH}")


def _present(tensors: dict, key: str, partner: str) -> torch.Tensor:
    if key not in tensors:
        raise FormatError(f"{partner!r} has no {key!r} beside it: {NEEDS_BOTH}")
    return tensors[key]


def _sigma(parameter: torch.Tensor, key: str, fmt: BnnFormat) -> torch.Tensor:
    if not parameter.is_floating_point():  # the reader checks the means; σ is float64 from here on
        raise FormatError(f"{key!r} is {str(parameter.dtype).removeprefix('torch.')}, not floating point")
    return SIGMA_TRANSFORMS[fmt.transform](parameter.detach().to(torch.float64))
