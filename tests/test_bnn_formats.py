"""Posteriors saved by BNN libraries (symlab.lib.bnn_formats), read by symlab.lib.weights as the libraries see them.

The files in tests/data/bnn_formats/ were written by bayesian-torch, BLiTZ, torchbnn and Pyro themselves
(tests/data/bnn_formats/make.py), so most tests here read them without the libraries. The tests at the end check
with the libraries: that make.py still writes those files, and that σ is what each library computes. They need
the libraries (requirements.txt, and requirements-formats.txt with --no-deps, which python -m pytest installs:
tests/prerequisites.py) and fail, not skip, without them.
"""

import dataclasses
import importlib
import importlib.util
import io
from operator import attrgetter
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from test_weights import cli_json

from symlab.labs.symmetry.experiment import network_report
from symlab.lib import align, bnn_formats, weights
from symlab.lib.weights import WeightsError

DATA = Path(__file__).parent / "data" / "bnn_formats"
SIZES = (4, 8, 3)
LAYERS = ("0.", "2.")  # nn.Sequential(Bayesian linear, ReLU, Bayesian linear)
# The small network, and one of MNIST's shape.
EACH_SIZE = pytest.mark.parametrize("sizes", [SIZES, (784, 16, 10)], ids=lambda sizes: "-".join(map(str, sizes)))

# Written out here, apart from bnn_formats' table: each library's keys for ((weight mean, σ parameter),
# (bias mean, σ parameter)), "{}" the layer's prefix, and σ from the σ parameter as the library's forward pass
# computes it, here in float64 from the file's float32.
KEYS = {
    "bayesian-torch": (("{}mu_weight", "{}rho_weight"), ("{}mu_bias", "{}rho_bias")),
    "BLiTZ": (("{}weight_mu", "{}weight_rho"), ("{}bias_mu", "{}bias_rho")),
    "torchbnn": (("{}weight_mu", "{}weight_log_sigma"), ("{}bias_mu", "{}bias_log_sigma")),
    "Pyro AutoNormal": (
        ("locs.{}weight_unconstrained", "scales.{}weight_unconstrained"),
        ("locs.{}bias_unconstrained", "scales.{}bias_unconstrained"),
    ),
}
SIGMA = {
    "bayesian-torch": lambda rho: torch.log1p(torch.exp(rho)),
    "BLiTZ": lambda rho: torch.log1p(torch.exp(rho)),
    "torchbnn": torch.exp,
    "Pyro AutoNormal": torch.nn.functional.softplus,
}
FORMULA = {
    "bayesian-torch": "σ = softplus(ρ)",
    "BLiTZ": "σ = softplus(ρ)",
    "torchbnn": "σ = exp(log σ)",
    "Pyro AutoNormal": "σ = softplus(scale_unconstrained)",
}
FILES = {  # file: (the library that wrote it, whether its layers have biases)
    "bayesian-torch.pt": ("bayesian-torch", True),
    "bayesian-torch-flipout.safetensors": ("bayesian-torch", True),
    "bayesian-torch-no-bias.pt": ("bayesian-torch", False),
    "blitz.pt": ("BLiTZ", True),
    "torchbnn.pt": ("torchbnn", True),
    "torchbnn-no-bias.safetensors": ("torchbnn", False),
    "pyro-autonormal.pt": ("Pyro AutoNormal", True),
}


def file_tensors(path: Path) -> dict[str, torch.Tensor]:
    return load_file(path) if path.suffix == ".safetensors" else torch.load(path, weights_only=True)


def torch_bytes(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def assert_posterior_of(network: weights.Network, tensors: dict, library: str, bias: bool = True) -> None:
    """``network``'s means are the file's means, its σ the library's transform of the file's σ parameters."""
    assert network.is_posterior and network.biases == (bias,) * len(network.means)
    assert network.describe().endswith(f", read from a {library} posterior ({FORMULA[library]})")
    for layer, means, sds in zip(LAYERS, network.means, network.sds):
        for part, (mean, sd) in enumerate(zip(means, sds)):
            mean_key, parameter_key = (template.format(layer) for template in KEYS[library][part])
            if part == 1 and not bias:
                assert not mean.any() and not sd.any()
                continue
            np.testing.assert_array_equal(mean, tensors[mean_key].double().numpy())
            np.testing.assert_allclose(sd, SIGMA[library](tensors[parameter_key].double()).numpy(), rtol=1e-12, atol=0)


def comparable(report) -> dict:
    """A symmetry report's numbers: all but its name, description and timing."""
    skip = {"name", "structure", "seconds", "raw_layers", "sorted_layers"}
    return {field.name: getattr(report, field.name) for field in dataclasses.fields(report) if field.name not in skip}


# --- the libraries' files, read -----------------------------------------------------------------------------------


@pytest.mark.parametrize("file", FILES)
def test_each_librarys_file_reads_as_its_posterior(file):
    library, bias = FILES[file]
    network = weights.read_network(DATA / file)
    assert network.sizes == SIZES and network.name == file
    assert_posterior_of(network, file_tensors(DATA / file), library, bias)


@pytest.mark.parametrize("file", FILES)
def test_symlabs_numbers_on_a_converted_file_are_those_on_the_librarys(file):
    network = weights.read_network(DATA / file)
    converted = weights.read_network(
        weights.posterior_bytes(network.means, network.sds, has_bias=network.has_bias), "converted.safetensors"
    )
    assert converted.library is None and (converted.sizes, converted.biases) == (network.sizes, network.biases)
    assert comparable(network_report(converted)) == comparable(network_report(network))
    # The converted file holds σ in float32: within its rounding of each σ.
    sds = network.gaussian().sd
    assert align.w2_distance(network.gaussian(), converted.gaussian()) <= 2.0**-24 * np.linalg.norm(sds)


def test_distances_between_two_libraries_posteriors_survive_conversion():
    a, b = (weights.read_network(DATA / file) for file in ("bayesian-torch.pt", "pyro-autonormal.pt"))
    a_copy, b_copy = (weights.read_network(weights.posterior_bytes(n.means, n.sds)) for n in (a, b))
    assert align.w2_distance(a_copy.gaussian(), b_copy.gaussian()) == pytest.approx(
        align.w2_distance(a.gaussian(), b.gaussian()), rel=1e-6
    )


def test_the_symmetry_cli_analyses_a_librarys_file(capsys):
    report = cli_json(capsys, "symmetry", "network", "--weights", str(DATA / "blitz.pt"))
    assert report["sizes"] == list(SIZES) and report["posterior"]
    assert report["structure"].endswith("read from a BLiTZ posterior (σ = softplus(ρ))")
    assert max(report["permutation_removal_change"], report["scaling_removal_change"]) < 1e-9


def test_the_align_cli_aligns_two_libraries_files(capsys):
    a, b = DATA / "bayesian-torch.pt", DATA / "torchbnn.pt"
    report = cli_json(capsys, "align", "--weights", str(a), str(b))
    assert report["names"] == [a.name, b.name] and report["posterior"] and report["sizes"] == list(SIZES)
    assert report["w2_after"] <= report["w2_before"]
    expected = align.w2_distance(*(weights.read_network(path).gaussian() for path in (a, b)))
    assert report["w2_before"] == pytest.approx(expected, rel=1e-12)


def test_layers_keep_the_models_order_under_symlabs_keys():
    renamed = {
        key.replace("0.", "hidden.").replace("2.", "a_out."): value
        for key, value in file_tensors(DATA / "torchbnn.pt").items()
    }
    fmt = bnn_formats.detect(renamed)
    assert fmt.name == "torchbnn" and bnn_formats.SD_PREFIX == weights.SD_PREFIX
    assert list(bnn_formats.to_symlab(renamed, fmt)) == [
        "hidden.weight",
        "sd.hidden.weight",
        "hidden.bias",
        "sd.hidden.bias",
        "a_out.weight",
        "sd.a_out.weight",
        "a_out.bias",
        "sd.a_out.bias",
    ]
    assert weights.read_network(torch_bytes(renamed)).sizes == SIZES  # "a_out" sorts first, but comes last
    assert bnn_formats.detect({"0.weight": torch.ones(2, 2), "sd.0.weight": torch.ones(2, 2)}) is None


# --- what is refused, and the message --------------------------------------------------------------------------


def read_error(tensors: dict) -> str:
    with pytest.raises(WeightsError) as refused:
        weights.read_network(torch_bytes(tensors), "upload.pt")
    return str(refused.value)


@pytest.mark.parametrize(
    "extra", [{}, file_tensors(DATA / "bayesian-torch.pt")], ids=["alone", "in a bayesian-torch file"]
)
def test_an_unknown_tensor_is_refused_with_the_formats_read_and_how_to_convert(extra):
    message = read_error({**extra, "0.foo_mu": torch.ones(8)})
    assert message.startswith("upload.pt: '0.foo_mu' belong to no nn.Linear layer")
    assert "a plain state_dict or safetensors file, a SymLab posterior (standard deviations under sd.<key>)" in message
    assert (
        "saved by bayesian-torch, BLiTZ, torchbnn or Pyro AutoNormal (for Pyro, the AutoNormal guide's "
        "state_dict(): the param store's save() pickles its constraint objects"
    ) in message
    assert (
        "save the means as <layer>.weight/<layer>.bias and the standard deviations as sd.<layer>.weight/sd.<layer>.bias"
    ) in message
    assert "\n" not in message


def test_files_mixing_formats_are_refused_naming_the_keys():
    bayesian_torch, torchbnn = (file_tensors(DATA / file) for file in ("bayesian-torch.pt", "torchbnn.pt"))
    mixed = {
        **bayesian_torch,
        **{"4." + key.removeprefix("2."): value for key, value in torchbnn.items() if key.startswith("2.")},
    }
    assert "mixes the posteriors of bayesian-torch ('0.rho_weight') and torchbnn ('4.weight_log_sigma')" in read_error(
        mixed
    )
    plain = {**bayesian_torch, "4.weight": torch.ones(2, 3), "4.bias": torch.ones(2)}
    assert "mixes nn.Linear or SymLab keys ('4.weight', '4.bias') with a bayesian-torch posterior" in read_error(plain)


def test_a_mean_without_its_sigma_parameter_is_refused_naming_both():
    state = file_tensors(DATA / "bayesian-torch.pt")
    del state["2.rho_bias"]
    assert "'2.mu_bias' has no '2.rho_bias' beside it" in read_error(state)
    state = file_tensors(DATA / "torchbnn.pt")
    means_only = {key: value for key, value in state.items() if "log_sigma" not in key}
    assert (
        "'0.weight_mu' has no σ parameter beside it (BLiTZ: '0.weight_rho', torchbnn: '0.weight_log_sigma')"
        in read_error(means_only)
    )
    pyro = file_tensors(DATA / "pyro-autonormal.pt")
    del pyro["locs.0.weight_unconstrained"]
    assert "'scales.0.weight_unconstrained' has no 'locs.0.weight_unconstrained' beside it" in read_error(pyro)


def test_sigma_parameters_are_checked_like_any_tensor():
    state = file_tensors(DATA / "torchbnn.pt")
    assert "'0.weight_log_sigma' is int32, not floating point" in read_error(
        {**state, "0.weight_log_sigma": state["0.weight_log_sigma"].to(torch.int32)}
    )
    assert "2.bias has 1 NaN or infinite value" in read_error(
        {**state, "2.bias_log_sigma": torch.tensor([0.0, 800.0, 0.0])}
    )  # exp(800) overflows float64
    mismatched = read_error({**file_tensors(DATA / "blitz.pt"), "0.weight_rho": torch.ones(8, 3)})
    assert "sd.0.weight has shape (8, 3), its mean (8, 4)" in mismatched


def test_a_large_rho_gives_a_finite_sigma():
    state = file_tensors(DATA / "bayesian-torch.pt")
    state["0.rho_bias"] = torch.full((8,), 1000.0)  # log1p(exp(1000)) would overflow: softplus(1000) = 1000
    network = weights.read_network(torch_bytes(state))
    np.testing.assert_array_equal(network.sds[0][1], np.full(8, 1000.0))


def test_pyros_param_store_is_refused_unread():
    with pytest.raises(WeightsError, match="refused: the file holds objects other than tensors.*constraints"):
        weights.read_network(DATA / "pyro-param-store.pt")


# --- with the libraries themselves ----------------------------------------------------------------------------


def library(module: str):
    """A BNN library a test needs. They are test requirements: missing, the test fails and says how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        pytest.fail(
            f"{module} is missing ({error}): install requirements.txt, then python -m pip install "
            "--no-deps -r requirements-formats.txt (python -m pytest does: tests/prerequisites.py)"
        )


@pytest.fixture(scope="module")
def make(bnn_libraries):
    """tests/data/bnn_formats/make.py, which writes the libraries' files."""
    spec = importlib.util.spec_from_file_location("make_bnn_formats", DATA / "make.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_files_are_what_the_libraries_write(make, tmp_path):
    for module in ("bayesian_torch", "blitz", "torchbnn", "pyro"):
        library(module)
    written = {path.name: path for path in make.write_all(tmp_path)}
    assert set(written) == set(FILES) | {"pyro-param-store.pt"}
    for name in FILES:  # to rounding: another CPU or thread count may sum in another order
        shipped, regenerated = file_tensors(DATA / name), file_tensors(written[name])
        assert list(regenerated) == list(shipped), f"{name}: run {DATA / 'make.py'}"
        for key in shipped:
            torch.testing.assert_close(
                regenerated[key],
                shipped[key],
                rtol=1e-4,
                atol=1e-6,
                msg=f"{name}: {key} differs; run {DATA / 'make.py'}",
            )
    with pytest.raises(WeightsError, match="refused: the file holds objects other than tensors.*constraints"):
        weights.read_network(written["pyro-param-store.pt"])


def assert_layers_read_as(model, network, mean, sd) -> None:
    """``network`` holds, for each Bayesian layer of ``model`` (every other module), the means ``mean(layer, part)``
    and the standard deviations ``sd(layer, part)`` of its "weight" and "bias" as the library computes them in
    float64."""
    model.double()
    for layer, (W, b), (sW, sb) in zip(model[::2], network.means, network.sds):
        for part, m, s in (("weight", W, sW), ("bias", b, sb)):
            np.testing.assert_array_equal(m, mean(layer, part).detach().numpy())
            np.testing.assert_allclose(s, sd(layer, part).detach().numpy(), rtol=1e-12, atol=0)


def mu_parameter(layer, part):
    """BLiTZ's and torchbnn's mean parameters: ``weight_mu``, ``bias_mu``."""
    return getattr(layer, f"{part}_mu")


@EACH_SIZE
def test_sigma_is_what_bayesian_torch_computes(make, sizes):
    library("bayesian_torch")
    model = make.bayesian_torch_model(sizes)
    # Older versions saved the prior and noise buffers that 0.5.0 keeps out of state_dict: ignored.
    network = weights.read_network(torch_bytes({**model.state_dict(), **dict(model.named_buffers())}))
    assert network.sizes == sizes
    # σ as LinearReparameterization.forward computes it (no function of its own exposes it).
    assert_layers_read_as(
        model,
        network,
        mean=lambda layer, part: getattr(layer, f"mu_{part}"),
        sd=lambda layer, part: torch.log1p(torch.exp(getattr(layer, f"rho_{part}"))),
    )


@EACH_SIZE
def test_sigma_is_what_blitzs_sampler_computes(make, sizes):
    library("blitz")
    model = make.blitz_model(sizes)
    network = weights.read_network(torch_bytes(model.state_dict()))

    def sampled_sigma(layer, part):
        sampler = getattr(layer, f"{part}_sampler")
        sampler.sample()  # sets the sampler's sigma
        return sampler.sigma

    assert_layers_read_as(model, network, mean=mu_parameter, sd=sampled_sigma)


@EACH_SIZE
def test_sigma_is_what_torchbnn_computes(make, sizes):
    library("torchbnn")
    model = make.torchbnn_model(sizes)
    network = weights.read_network(torch_bytes(model.state_dict()))
    # σ as BayesLinear.forward computes it.
    sd = lambda layer, part: torch.exp(getattr(layer, f"{part}_log_sigma"))
    assert_layers_read_as(model, network, mean=mu_parameter, sd=sd)


@EACH_SIZE
def test_sigma_is_what_pyros_autonormal_computes(make, sizes):
    library("pyro")
    from pyro.infer.autoguide import AutoNormal
    from torch.distributions import biject_to

    guide = make.pyro_guide(sizes)
    network = weights.read_network(torch_bytes(guide.state_dict()))
    to_scale = biject_to(AutoNormal.scale_constraint)  # the transform the guide applies to its unconstrained scales
    for layer, means, sds in zip(LAYERS, network.means, network.sds):
        for part, mean, sd in zip(("weight", "bias"), means, sds):
            loc, scale = (attrgetter(layer + part)(guide.locs), attrgetter(layer + part)(guide.scales))
            np.testing.assert_array_equal(mean, loc.detach().double().numpy())
            unconstrained = attrgetter(layer + part + "_unconstrained")(guide.scales)
            np.testing.assert_allclose(sd, to_scale(unconstrained.detach().double()).numpy(), rtol=1e-12, atol=0)
            np.testing.assert_allclose(sd, scale.detach().numpy(), rtol=1e-6)  # the guide's own float32 scale
