"""CONTRIBUTING.md's recipe for a new lab, followed once: a lab package, its command module, a page file
and one registry line, written to a temporary directory. The app's home page and navigation, the command line and the
hostile-input suite's parameter list pick the lab up with nothing else edited."""

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from symlab import cli, labs
from symlab.specs.urlstate import parse_query
from views.common import binding

ROOT = Path(__file__).resolve().parents[1]

CONFIG = '''
from dataclasses import dataclass

from symlab.specs import controls


@dataclass(frozen=True)
class CoinConfig:
    """Heads in ``flips`` flips of a coin with bias ``bias``: the posterior mean under a uniform prior."""

    flips: int = controls.control(10, low=1, high=1000, label="Flips", help="coin flips", url="n")
    bias: float = controls.control(0.5, low=0.0, high=1.0, step=0.05, label="Bias", help="P(heads)")

    def validate(self):
        return controls.validate(self)
'''
EXPERIMENT = """
from .config import CoinConfig


def run(config: CoinConfig) -> dict:
    heads = round(config.flips * config.bias)
    return {"heads": heads, "posterior_mean": (heads + 1) / (config.flips + 2)}
"""
CLI = """
from coinlab import experiment
from coinlab.config import CoinConfig
from symlab.specs import controls


def register(subparsers):
    p = subparsers.add_parser("coin", help="a coin's posterior mean")
    controls.add_flags(p, CoinConfig)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=lambda args: experiment.run(controls.from_args(CoinConfig, args)),
                   format=lambda report: f"posterior mean {report['posterior_mean']:.3f}")
"""
PARAMS = """
from symlab.specs import controls

from .config import CoinConfig


def page_params(hosting=None):
    return controls.url_params(CoinConfig)
"""
INIT = """
from symlab.specs.lab import Lab

LAB = Lab("coin", "Coin", ":material/toll:", blurb="A coin's posterior.", command="coincli:register",
          params="coinlab.params:page_params", page="{page}")
"""
PAGE = """
import streamlit as st

from coinlab import LAB
from coinlab.config import CoinConfig
from coinlab.experiment import run
from views.common import binding
from symlab.specs import controls

PAGE = "coin"
SPECS = LAB.page_params(binding.server_settings())


def widgets():
    with st.sidebar:
        binding.control_widget(PAGE, CoinConfig, "flips")
        binding.control_widget(PAGE, CoinConfig, "bias")


values = binding.start_page(PAGE, SPECS, LAB.title, LAB.blurb, widgets)
config = CoinConfig(**controls.config_values(CoinConfig, values)).validate()
st.metric("posterior mean", f"{run(config)['posterior_mean']:.3f}")
"""


@pytest.fixture
def coin_lab(tmp_path, monkeypatch):
    """The recipe's steps: the package ``coinlab`` (a lab package outside symlab/labs/, so that the
    repository is not touched), its command module ``coincli.py`` (as symlab/cli/<name>.py), the page
    ``coin.py`` (its path relative to app.py, as views/ files are given), and the lab added to the registry."""
    package = tmp_path / "coinlab"
    package.mkdir()
    page = tmp_path / "coin.py"
    for name, text in (
        ("config.py", CONFIG),
        ("experiment.py", EXPERIMENT),
        ("params.py", PARAMS),
        ("__init__.py", INIT.format(page=os.path.relpath(page, ROOT))),
    ):
        (package / name).write_text(textwrap.dedent(text))
    (tmp_path / "coincli.py").write_text(textwrap.dedent(CLI))
    page.write_text(textwrap.dedent(PAGE))
    monkeypatch.syspath_prepend(str(tmp_path))
    import coinlab

    registered = (*labs.LABS, coinlab.LAB)  # the one line in symlab/labs/__init__.py
    monkeypatch.setattr(labs, "LABS", registered)
    monkeypatch.setattr(cli, "LABS", registered)  # as the command line read it when it was imported
    yield coinlab.LAB
    for name in [m for m in sys.modules if m in ("coinlab", "coincli") or m.startswith("coinlab.")]:
        del sys.modules[name]


def test_the_command_line_lists_and_runs_the_new_lab(coin_lab, capsys):
    assert "coin" in cli.build_parser().format_help()
    assert cli.main(["coin", "--flips", "8", "--bias", "0.25", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"heads": 2, "posterior_mean": 0.3}
    with pytest.raises(SystemExit) as exit_:
        cli.main(["coin", "--bias", "1.5"])
    assert exit_.value.code == 2
    assert "'1.5' must be a finite number in [0, 1]" in capsys.readouterr().err


def test_the_app_links_and_opens_the_new_lab(coin_lab):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception
    links = at.get("page_link")
    assert [link.proto.page for link in links][-1] == "coin"
    assert links[-1].proto.label == "**Coin**"
    at = AppTest.from_file(str(ROOT / coin_lab.page), default_timeout=60)  # the page, as the lab pages' tests run them
    at.query_params.update({"n": "8", "bias": "0.3"})
    at.run()
    assert not at.exception
    assert at.number_input(key="coin.n").value == 8  # the widget key is the declared URL name
    assert at.slider(key="coin.bias").value == pytest.approx(0.3)
    assert [m.value for m in at.metric] == ["0.300"]  # round(8 × 0.3) = 2 heads: (2 + 1) / 10
    assert not at.warning


def test_the_hostile_input_suite_sees_the_new_lab_parameters(coin_lab):
    params = coin_lab.page_params(binding.server_settings())
    assert [(p.name, p.kind, p.low, p.high, p.step) for p in params] == [
        ("n", "int", 1, 1000, None),
        ("bias", "float", 0.0, 1.0, 0.05),
    ]
    values, notices = parse_query({"n": "5000", "bias": "nan"}, params)
    assert values == {"n": 1000, "bias": 0.5} and len(notices) == 2
