"""The symmetrisation study (benchmarks/study_symmetrisation.py): its runs, its pairing, resuming and the summary."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import study_symmetrisation as study  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture
def tiny_study(monkeypatch):
    """One width at two sizes, 300 steps a run: the study's shape in seconds."""
    monkeypatch.setattr(study, "WIDTHS", {500: (16,), 2000: (16,)})
    monkeypatch.setattr(study, "STEPS", {500: 300, 2000: 300})


def test_the_grid_pairs_every_sgm_variant_with_mfvi_and_checks_the_starts():
    jobs = study.make_jobs(list(study.WIDTHS), 3)
    keys = {study.job_key(job) for job in jobs}
    assert len(keys) == len(jobs)
    for job in jobs:
        assert study.job_key(dict(job, variant="mfvi", init_sd=study.DEFAULT_INIT_SD)) in keys
    assert all((job["subset"], job["hidden"]) in study.LARGEST_K_CELLS for job in jobs if job["variant"] == "infonce64")
    starts = {
        job["init_sd"]
        for job in jobs
        if job["variant"] == "mfvi" and job["subset"] == study.CHECK_SIZE and job["hidden"] in study.CHECK_WIDTHS
    }
    assert starts == {1e-3, 0.05, 0.2}
    config = study.job_config(jobs[0])
    assert config.sd_fit == "curvature" and config.lr_schedule == "cosine" and config.epochs * 128 >= jobs[0]["steps"]


def test_a_study_runs_resumes_and_summarises(tiny_study, tmp_path, capsys):
    out = tmp_path / "study.jsonl"
    assert study.main(["--sizes", "500", "--seeds", "2", "--jobs", "2", "--out", str(out)]) == 0
    entries = study.load(out)
    assert len(entries) == 2 * 5 and all(e["status"] == "finished" for e in entries.values())
    table = capsys.readouterr().out
    assert "infonce16" in table and "blocks4" in table
    assert study.main(["--sizes", "500", "--seeds", "2", "--out", str(out)]) == 0
    assert "10 runs done, 0 to go" in capsys.readouterr().err  # resumed: nothing trained again
    assert study.main(["--summary", "--json", "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    rows = {row["variant"]: row for row in summary["rows"]}
    assert set(rows) == set(study.SGM_VARIANTS) and all(row["seeds"] == 2 for row in rows.values())
    # Paired on minibatches and noise: an SGM run whose term never had a gradient is MFVI to the last digit.
    for row in rows.values():
        if row["mi_active"] == 0:
            assert row["d_test_acc_mean"] == 0 and row["d_elbo_mean"] == 0


def test_final_window_averages_the_last_steps():
    history = [{"steps": 4, "train_elbo": -10.0}] * 200 + [{"steps": 4, "train_elbo": -2.0}] * 125
    assert study.final_window(history) == -2.0  # 125 epochs of 4 steps make the 500-step window
    assert study.final_window(history[:-1]) == pytest.approx((124 * -2.0 + -10.0) / 125)


def test_the_shipped_summary_loads_and_a_missing_or_damaged_one_says_how_to_rebuild(tmp_path):
    from symlab.labs.mnist import study as shipped

    summary = shipped.load_study()
    assert summary["rows"] and {row["variant"] for row in summary["rows"]} <= set(study.SGM_VARIANTS)
    with pytest.raises(shipped.StudyError, match="missing: rebuild it with `python benchmarks/study_symmetrisation"):
        shipped.load_study(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(shipped.StudyError, match="cannot be read"):
        shipped.load_study(tmp_path / "bad.json")
    (tmp_path / "short.json").write_text(json.dumps({"rows": [{"subset": 500}], "starts": [], "recipes": []}))
    with pytest.raises(shipped.StudyError, match="rows without .*d_elbo_mean"):
        shipped.load_study(tmp_path / "short.json")


def test_the_shipped_summary_is_the_summary_of_the_shipped_runs():
    from symlab.labs.mnist import study as shipped

    assert json.loads(json.dumps(study.summarise(study.load(study.DEFAULT_OUT)))) == shipped.load_study()


def test_compacting_a_history_keeps_its_steps_means_and_evaluations():
    import numpy as np

    rng = np.random.default_rng(0)
    steps = rng.normal(-1000.0, 30.0, (250, 4))  # 250 epochs of 4 steps, evaluated every 50
    history = [
        {
            "epoch": e + 1,
            "steps": 4,
            "train_elbo": float(steps[e].mean()),
            "train_elbo_sd": float(steps[e].std()),
            "log_sd_mean": -float(e),
            "seconds": 0.1,
            **({"test_acc": 0.9} if (e + 1) % 50 == 0 else {}),
        }
        for e in range(250)
    ]
    compact = study.compact_history(history)
    assert sum(m["steps"] for m in compact) == 1000 and len(compact) < 30
    assert [m["epoch"] for m in compact if "test_acc" in m] == [50, 100, 150, 200, 250]
    chunk = compact[0]  # epochs 1–25: 100 steps
    assert chunk["epoch"] == 25 and chunk["log_sd_mean"] == -24.0
    assert chunk["train_elbo"] == pytest.approx(steps[:25].mean()) and chunk["train_elbo_sd"] == pytest.approx(
        steps[:25].std()
    )
    assert study.compact_history(compact) == compact
