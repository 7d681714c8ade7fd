"""benchmarks/bench_first_load.py at its smallest setting: one visit to one class-path step on one server."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_first_load  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_visit_is_timed_from_the_apps_load_to_its_first_chart(capsys):
    bench_first_load.main(["--pages", "modes?alpha=5.2", "--repeat", "1", "--one-server", "--json"])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    [visit] = report["visits"]
    assert visit["page"] == "modes?alpha=5.2" and not visit["exceptions"]
    # One clock for the whole visit (the epoch's), so the waits, taken in turn, read in order even if the page loaded
    # again; the app's script has run (DOMContentLoaded) before it draws the title in the same document.
    assert 0 < visit["title_s"] <= visit["first_chart_s"] <= visit["complete_s"]
    assert visit["documents"] >= 1 and 0 < visit["script_loaded_s"]
    if visit["documents"] == 1:
        assert visit["script_loaded_s"] <= visit["title_s"]
    assert report["rates"]["matmul_gflops"] > 0 and report["quota_cores"] is None


def test_the_class_paths_links_are_its_steps_presets():
    links = bench_first_load.class_path_links(hosted=False)
    assert len(links) == 10 and links[0] == "modes" and "modes?alpha=5.2" in links
    assert any(link.startswith("mnist?") for link in links)
