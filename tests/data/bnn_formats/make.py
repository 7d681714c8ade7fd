"""The BNN libraries' files that tests/test_bnn_formats.py reads, written by the libraries themselves: each one's
Bayesian linear layers in an MLP with ReLU between them, a few Adam steps on a fixed batch (so that σ differs from
weight to weight, as a trained posterior's does), saved the way the library's users save it. The tests read these
files without the libraries, and check with the libraries that this script still writes them. Regenerate from the
repository root, with requirements-formats.txt installed:

    python tests/data/bnn_formats/make.py
"""

from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

HERE = Path(__file__).parent
SIZES = (4, 8, 3)
STEPS = 10


def bayesian_torch_model(sizes=SIZES, bias=True, kind="Reparameterization") -> nn.Module:
    """An nn.Linear MLP made Bayesian by bayesian-torch's dnn_to_bnn, its documented route (``kind``: its
    LinearReparameterization or LinearFlipout layers)."""
    from bayesian_torch.models.dnn_to_bnn import dnn_to_bnn

    torch.manual_seed(0)
    model = _mlp(lambda fan_in, fan_out: nn.Linear(fan_in, fan_out, bias=bias), sizes)
    dnn_to_bnn(
        model,
        {
            "prior_mu": 0.0,
            "prior_sigma": 1.0,
            "posterior_mu_init": 0.0,
            "posterior_rho_init": -3.0,
            "type": kind,
            "moped_enable": False,
        },
    )
    return _trained(model, sizes)


def blitz_model(sizes=SIZES) -> nn.Module:
    from blitz.modules import BayesianLinear

    torch.manual_seed(0)
    return _trained(_mlp(BayesianLinear, sizes), sizes)


def torchbnn_model(sizes=SIZES, bias=True) -> nn.Module:
    import torchbnn

    torch.manual_seed(0)
    return _trained(
        _mlp(
            lambda fan_in, fan_out: torchbnn.BayesLinear(
                prior_mu=0.0, prior_sigma=0.1, in_features=fan_in, out_features=fan_out, bias=bias
            ),
            sizes,
        ),
        sizes,
    )


def pyro_guide(sizes=SIZES):
    """A PyroModule MLP with N(0, 1) priors on its weights and biases, classifying a fixed batch, and its AutoNormal
    guide after a few SVI steps (Pyro's global param store holds the same parameters)."""
    import pyro
    import pyro.distributions as dist
    from pyro.infer import SVI, Trace_ELBO
    from pyro.infer.autoguide import AutoNormal
    from pyro.nn import PyroModule, PyroSample

    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    net = _mlp(lambda fan_in, fan_out: PyroModule[nn.Linear](fan_in, fan_out), sizes, PyroModule[nn.Sequential])
    for layer in list(net)[::2]:
        layer.weight = PyroSample(dist.Normal(0.0, 1.0).expand(layer.weight.shape).to_event(2))
        layer.bias = PyroSample(dist.Normal(0.0, 1.0).expand(layer.bias.shape).to_event(1))

    def model(inputs, labels):
        logits = net(inputs)  # outside the plate: one draw of the weights for the whole batch
        with pyro.plate("data", len(inputs)):
            pyro.sample("label", dist.Categorical(logits=logits), obs=labels)

    guide = AutoNormal(model)
    inputs, labels = _batch(sizes)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.05}), Trace_ELBO())
    for _ in range(STEPS):
        svi.step(inputs, labels.argmax(1))
    return guide


def _mlp(layer, sizes, container=nn.Sequential) -> nn.Module:
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        layers += [layer(fan_in, fan_out), nn.ReLU()]
    return container(*layers[:-1])


def _batch(sizes):
    generator = torch.Generator().manual_seed(1)
    return torch.randn(32, sizes[0], generator=generator), torch.randn(32, sizes[-1], generator=generator)


def _trained(model: nn.Module, sizes) -> nn.Module:
    """A few Adam steps of squared error through the library's sampled forward pass: means and σ parameters move."""
    inputs, targets = _batch(sizes)
    optimiser = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(STEPS):
        optimiser.zero_grad()
        (model(inputs) - targets).pow(2).mean().backward()
        optimiser.step()
    return model.eval()


def _safetensors(state: dict, path: Path) -> None:
    save_file({key: value.contiguous() for key, value in state.items()}, path)


def write_all(directory: Path = HERE) -> list[Path]:
    """Every file the tests read, into ``directory``."""
    import pyro

    writers = {
        "bayesian-torch.pt": lambda path: torch.save(bayesian_torch_model().state_dict(), path),
        "bayesian-torch-flipout.safetensors": lambda path: _safetensors(
            bayesian_torch_model(kind="Flipout").state_dict(), path
        ),
        "bayesian-torch-no-bias.pt": lambda path: torch.save(bayesian_torch_model(bias=False).state_dict(), path),
        "blitz.pt": lambda path: torch.save(blitz_model().state_dict(), path),
        "torchbnn.pt": lambda path: torch.save(torchbnn_model().state_dict(), path),
        "torchbnn-no-bias.safetensors": lambda path: _safetensors(torchbnn_model(bias=False).state_dict(), path),
        "pyro-autonormal.pt": lambda path: torch.save(pyro_guide().state_dict(), path),
        # Written right after pyro-autonormal.pt: the param store holds that guide's parameters.
        "pyro-param-store.pt": lambda path: torch.save(pyro.get_param_store().get_state(), path),
    }
    for name, write in writers.items():
        write(directory / name)
    return [directory / name for name in writers]


if __name__ == "__main__":
    for path in write_all():
        print(f"{path}: {path.stat().st_size:,} bytes")
