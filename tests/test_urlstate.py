import math

import pytest

from symlab.specs.urlstate import Param, encode_query, parse_query

SPECS = (
    Param("alpha", "float", 3.0, 0.0, 20.0, step=0.05),
    Param("dim", "int", 2, 1, 50),
    Param("forward", "bool", False),
    Param("mode", "choice", "exact", choices=("exact", "mc")),
)


def test_round_trip():
    values = {"alpha": 4.35, "dim": 7, "forward": True, "mode": "mc"}
    parsed, notices = parse_query(encode_query(values, SPECS), SPECS)
    assert parsed == values and notices == []


def test_missing_parameters_take_defaults_silently():
    parsed, notices = parse_query({}, SPECS)
    assert parsed == {"alpha": 3.0, "dim": 2, "forward": False, "mode": "exact"} and notices == []


@pytest.mark.parametrize(
    "raw, expected, fragment",
    [
        ("abc", 3.0, "not a number"),
        ("nan", 3.0, "NaN"),
        ("inf", 20.0, "clamped to 20"),
        ("-inf", 0.0, "clamped to 0"),
        ("1e308", 20.0, "clamped"),
        ("-5", 0.0, "below the minimum"),
        ("3.1234", 3.1, "rounded"),
        ("x" * 10_000, 3.0, "…"),
        ("", 3.0, "not a number"),
    ],
)
def test_bad_floats_are_fixed_with_a_notice(raw, expected, fragment):
    parsed, notices = parse_query({"alpha": raw}, SPECS)
    assert parsed["alpha"] == pytest.approx(expected)
    assert len(notices) == 1 and fragment in notices[0]
    assert len(notices[0]) < 200


@pytest.mark.parametrize("raw, expected", [("2.5", 2), ("1e9", 50), ("0", 1), ("seven", 2)])
def test_bad_ints(raw, expected):
    parsed, notices = parse_query({"dim": raw}, SPECS)
    assert parsed["dim"] == expected and isinstance(parsed["dim"], int) and notices


def test_bools_choices_unknowns_and_repeats():
    parsed, notices = parse_query(
        {"forward": "maybe", "mode": "magic", "zzz": "1", "alpha": ["1.0", "2.0"], "embed": "true"}, SPECS
    )
    assert parsed["forward"] is False and parsed["mode"] == "exact" and parsed["alpha"] == 2.0
    assert len(notices) == 3
    assert any("zzz" in n for n in notices)


def test_encoded_values_are_finite_strings():
    encoded = encode_query({"alpha": 0.1 + 0.2, "dim": 3, "forward": False, "mode": "exact"}, SPECS)
    assert encoded == {"alpha": "0.3", "dim": "3", "forward": "0", "mode": "exact"}
    assert all(math.isfinite(float(v)) for k, v in encoded.items() if k in ("alpha", "dim"))
