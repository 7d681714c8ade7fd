"""One declaration per control (symlab.specs.controls): the URL parameter, the command-line flag and the
validation derived from it agree with it and with each other, for every lab's declared configs."""

import argparse
import dataclasses
import importlib
import importlib.util
import math

import pytest

from symlab.labs import LABS
from symlab.specs import controls, results
from symlab.specs.controls import control
from symlab.specs.settings import Hosting
from symlab.specs.urlstate import parse_query


@dataclasses.dataclass(frozen=True)
class Example:
    width: int = control(16, low=2, high=512, label="Width", help="hidden units", url="w")
    rate: float = control(0.01, low=1e-4, high=1.0, step=None, label="Rate")
    mode: str = control("a", choices=("a", "b"), label="Mode")
    fast: bool = control(False, label="Fast")

    def validate(self):
        return controls.validate(self, [(self.mode == "a" or self.width <= 64, "mode b needs width <= 64")])


def parser_for(config_type):
    parser = argparse.ArgumentParser(exit_on_error=False)
    controls.add_flags(parser, config_type)
    return parser


def test_a_default_outside_its_declared_range_is_refused_at_declaration():
    with pytest.raises(ValueError, match="default 0 is not a whole number in \\[1, 5\\]"):
        control(0, low=1, high=5)


def test_validation_names_every_bad_field_at_once():
    with pytest.raises(ValueError) as error:
        Example(width=1, rate=math.nan, mode="c", fast=1).validate()
    message = str(error.value)
    for name in ("width", "rate", "mode", "fast"):
        assert f"{name} must be" in message
    with pytest.raises(ValueError, match="mode b needs width <= 64"):
        Example(width=128, mode="b").validate()
    assert Example(width=64, mode="b").validate() == Example(width=64, mode="b")


def test_url_parameters_follow_the_declaration_and_a_cap_lowers_only_the_top():
    width, rate, mode, fast = controls.url_params(Example)
    assert (width.name, width.kind, width.low, width.high, width.default) == ("w", "int", 2, 512, 16)
    assert (mode.kind, mode.choices, fast.kind) == ("choice", ("a", "b"), "bool")
    (capped,) = controls.url_params(Example, ["width"], caps={"width": 8})
    assert (capped.low, capped.high, capped.default) == (2, 8, 8)  # the default itself is capped
    values, notices = parse_query({"w": "100"}, [capped])
    assert values == {"w": 8} and "clamped to 8" in notices[0]
    assert controls.url_params(Example, ["width"], caps={"width": 10_000})[0].high == 512  # a cap never widens


def test_page_values_map_back_to_a_config():
    values, _ = parse_query({"w": "32", "mode": "b", "fast": "1"}, controls.url_params(Example))
    config = Example(**controls.config_values(Example, values)).validate()
    assert config == Example(width=32, mode="b", fast=True)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--width", "1"], "'1' must be a whole number in [2, 512]"),
        (["--width", "2.5"], "'2.5' is not a whole number"),
        (["--rate", "nan"], "'nan' must be a finite number in [0.0001, 1]"),
        (["--mode", "c"], "invalid choice"),
    ],
)
def test_flags_refuse_what_the_declaration_refuses(argv, message):
    with pytest.raises(argparse.ArgumentError, match=message.replace("[", "\\[").replace("]", "\\]")):
        parser_for(Example).parse_args(argv)


def test_flags_build_the_same_config_as_the_page():
    args = parser_for(Example).parse_args(["--width", "32", "--mode", "b", "--fast"])
    assert controls.from_args(Example, args) == Example(width=32, mode="b", fast=True)
    assert controls.from_args(Example, parser_for(Example).parse_args([])) == Example()


def test_every_value_the_url_accepts_the_flag_accepts_and_validation_keeps():
    for param in controls.url_params(Example):
        name = next(n for n, (spec, _) in controls.declared(Example).items() if (spec.url or n) == param.name)
        spec = controls.declaration(Example, name)
        for value in (
            [param.low, param.high]
            if param.kind in ("int", "float")
            else list(param.choices)
            if param.kind == "choice"
            else [True, False]
        ):
            assert spec.accepts(value), (name, value)


def test_to_json_makes_reports_plain_and_leaves_out_in_memory_fields():
    import numpy as np

    @dataclasses.dataclass
    class Report:
        loss: float
        curve: np.ndarray
        model: object = results.in_memory(default=None)

    plain = results.to_json(Report(loss=math.inf, curve=np.array([1.0, np.nan]), model=object()))
    assert plain == {"loss": None, "curve": [1.0, None]}
    assert results.to_json({"a": (np.int64(3), np.float32(0.5), np.bool_(True))}) == {"a": [3, 0.5, True]}
    assert issubclass(results.TrainingDiverged, RuntimeError)  # the CLI's exit path for runtime errors


def declared_configs(lab):
    """The config dataclasses that declare controls, in a lab's config module (it loads neither numpy nor torch)."""
    module = importlib.import_module(f"symlab.labs.{lab.name}.config")
    return [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and dataclasses.is_dataclass(value)
        and value.__module__ == module.__name__
        and controls.declared(value)
    ]


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.name)
def test_every_page_parameter_of_a_declared_field_is_the_declaration_or_a_cap_of_it(lab):
    configs = declared_configs(lab)
    assert configs, f"{lab.name} declares no controls"
    for config_type in configs:
        assert config_type().validate() == config_type()  # the declared defaults are valid together
    derived = 0
    for param in lab.page_params(Hosting.defaults(False)):
        specs = [
            spec
            for config_type in configs
            for name, (spec, _) in controls.declared(config_type).items()
            if (spec.url or name) == param.name
        ]
        for spec in specs:
            derived += 1
            assert param.kind == spec.kind and param.low == spec.low and param.step == spec.step, (param, spec)
            assert spec.high is None or param.high <= spec.high, (param, spec)
            if spec.kind == "choice":
                assert param.choices == tuple(map(str, spec.choices)), (param, spec)
    assert derived, f"no page parameter of {lab.name} derives from a declaration"
