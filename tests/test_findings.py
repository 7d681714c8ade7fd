"""The findings (symlab/serving/findings.py) are stated once: their numbers, shipped in assets/findings.json, are
what the labs' shipped results give, and the home page, the README and the class path say them as written there."""

import json
import math
import os
import re
import string
import subprocess
import sys
from pathlib import Path

import pytest

from symlab.serving import findings
from symlab.specs.lessons import lesson_path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_the_shipped_numbers_are_what_the_shipped_results_give():
    shipped, measured = findings.numbers(), findings.measure()
    assert shipped.keys() == measured.keys()
    for name, value in measured.items():
        assert shipped[name] == (pytest.approx(value, rel=1e-9) if isinstance(value, float) else value), name


def test_each_finding_reads_its_numbers_and_changes_with_them():
    """A finding states the shipped numbers, not typed ones: change one and the text follows."""
    values = findings.numbers()
    before = {finding.title: finding.text for finding in findings.findings(values)}
    moved = findings.findings(
        {
            **values,
            "align_barrier_before": 0.777,
            "align_barrier_after": 0.05,  # 17 of its errors: lowered, not removed
            "toy_gain_close": 0.123,
            "mnist_gain": 321.0,
            "toy_mse_change_inside_spread": False,
        }
    )
    texts = {finding.title: finding.text for finding in moved}
    align = "Two posteriors from different seeds are one mode, permuted."
    assert "0.402 ± 0.029 nats before" in before[align] and "0.777 ± 0.029 nats before" in texts[align]
    assert "removes the loss barrier" in before[align] and "lowers the loss barrier" in texts[align]
    assert "above 2 Monte-Carlo standard errors" in texts[align]
    assert "by 0.12 nats" in texts["Symmetrising gains up to log |G| in the bound."]
    assert "by up to 321 nats" in texts["Once VI has converged, symmetrisation acts on pruned units."]
    assert "not always inside" in texts["The predictions did not change."]


def test_the_readme_states_each_finding_as_the_home_page_does():
    for finding in findings.findings():
        assert flat(finding.markdown()) in flat(README), finding.title


def test_the_home_page_cards_show_the_findings():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    shown = flat(" ".join(block.value for block in at.markdown))
    for finding in findings.findings():
        assert flat(finding.markdown()) in shown, finding.title
    assert "Still open" not in shown


def test_the_class_path_names_only_shipped_numbers_and_its_own_length():
    path = lesson_path()
    numbers = findings.numbers()
    for step in path.steps:
        named = {field for _, field, _, _ in string.Formatter().parse(step.see) if field}
        assert named <= numbers.keys(), (step.number, named - numbers.keys())
        assert "{" not in step.seen(numbers)
    minutes = sum(step.minutes for step in path.steps)
    assert path.title.startswith(f"A {minutes}-minute class")
    assert f"{minutes}-minute class path" in README and not re.search(rf"\b(?!{minutes})\d+-minute class", README)


def test_the_class_path_says_what_the_shipped_fig1_and_alignment_show():
    numbers = findings.numbers()
    seen = {step.lab + ":" + step.preset: step.seen(numbers) for step in lesson_path().steps}
    assert f"{numbers['fig1_sorted_peaks']} peaks remain" in seen["symmetry:Fig. 1: the doubled mode"]
    assert numbers["fig1_sorted_peaks"] == 3  # the shipped Fig. 1: sorting leaves one of each mirror pair
    after = f"{numbers['align_barrier_after']:.3f} ± {numbers['align_barrier_after_se']:.3f} after"
    assert after in seen["align:Half moons, two hidden layers"]


def test_a_missing_or_damaged_shipped_file_says_how_to_write_it(tmp_path, monkeypatch):
    monkeypatch.setattr(findings, "SHIPPED", tmp_path / "findings.json")
    findings.numbers.cache_clear()
    try:
        with pytest.raises(findings.FindingsError, match="python -m symlab.serving.findings"):
            findings.numbers()
        (tmp_path / "findings.json").write_text("{not json")
        findings.numbers.cache_clear()
        with pytest.raises(findings.FindingsError, match="cannot be read"):
            findings.numbers()
    finally:
        findings.numbers.cache_clear()
    from symlab.labs.toy import findings as toy_findings

    with pytest.raises(findings.FindingsError, match="--table"):
        toy_findings.numbers(path=tmp_path / "absent.json")


@pytest.mark.slow
def test_the_shipped_toy_table_is_what_the_command_gives():
    """assets/study/toy_table.json, which the toy findings read, is the table its command computes here."""
    from symlab.labs.toy import experiment as toy
    from symlab.labs.toy.findings import TOY_TABLE

    shipped = json.loads(TOY_TABLE.read_text())
    config = toy.ToyConfig(**shipped["config"]).validate()
    alphas = sorted({row["alpha"] for row in shipped["table"]})
    seeds = shipped["table"][0]["seeds"]
    task = toy.table_task(alphas, seeds, config)
    rows = task.function(*task.args, progress=lambda *a, **k: None)
    assert len(rows) == len(shipped["table"])
    for row, stored in zip(rows, shipped["table"]):
        for key, value in stored.items():
            if isinstance(value, float) and not math.isnan(value):
                assert row[key] == pytest.approx(value, rel=1e-6, abs=1e-9), key
            else:
                assert row[key] == value, key


# ------------------------------------------------------------------------------------------ claims on the pages


def test_the_toy_tables_do_not_call_the_exact_test_mse_a_floor_which_mfvi_beats_in_the_shipped_table():
    from streamlit.testing.v1 import AppTest

    from symlab.labs.toy.findings import TOY_TABLE

    rows = json.loads(TOY_TABLE.read_text())["table"]
    assert any(row["test_mse_mean"] < row["exact_test_mse_mean"] for row in rows if row["method"] == "mfvi")
    at = AppTest.from_file(str(ROOT / "views" / "toy.py"), default_timeout=60).run()
    text = flat(" ".join(block.value for block in at.markdown))
    assert "Bayes-optimal reference, not a floor" in text and "best a method can" not in text


def test_the_mnist_starts_table_is_headed_by_what_its_numbers_say():
    from symlab.labs.mnist import study
    from views.mnist import starts_verdict

    starts = study.load_study()["starts"]
    assert "an optimum of its own" in starts_verdict(starts) and "−620 nats" in starts_verdict(starts)
    within = [{**s, "d_elbo": [s["d_elbo"][1] * 0.5, s["d_elbo"][1]]} for s in starts]
    assert "one optimum" in starts_verdict(within)


def test_the_methods_command_names_every_method_it_runs():
    from symlab.labs.methods.experiment import LABELS, METHODS

    shown = subprocess.run(
        [sys.executable, "-m", "symlab", "methods", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "COLUMNS": "400"},
    ).stdout
    assert all(LABELS[method] in flat(shown) for method in METHODS), shown


def test_each_lab_declares_its_findings_with_a_command_that_parses():
    """Every lab names its findings module (Lab.findings); each finding carries the command that reproduces its
    numbers, and a `symlab ...` command is one the command line accepts."""
    import shlex

    from symlab.cli import build_parser
    from symlab.labs import LABS

    assert all(lab.findings == f"symlab.labs.{lab.name}.findings" for lab in LABS)
    stated = findings.findings()
    assert {finding.lab for finding in stated} == {lab.name for lab in LABS}
    parser = build_parser()
    for finding in stated:
        for command in finding.command.split(" (")[0].split(";"):
            words = shlex.split(command)
            if words[0] == "symlab":
                parser.parse_args(words[1:])
            else:
                assert (ROOT / words[1]).is_file(), command
