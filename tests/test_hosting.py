"""Hosted mode: the classroom caps, their variables, and how the pages show and apply them."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from symlab.labs import run_kinds
from symlab.labs.mnist.experiment import MnistConfig
from symlab.runs import supervisor
from symlab.runs.registry import Registry
from symlab.specs.run_kind import FINISHED
from symlab.specs.settings import (
    HOSTED_DEFAULTS,
    Hosting,
    LiveLimits,
    RunLimits,
    SettingsError,
)
from views.common.animation import sent as player_document

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def test_defaults_the_switch_and_single_variables():
    assert Hosting.from_env({}) == Hosting(False, RunLimits(), LiveLimits())
    hosted = Hosting.from_env({"SYMLAB_HOSTED": "1"})
    assert hosted.hosted and hosted.runs == RunLimits(**HOSTED_DEFAULTS[RunLimits])
    assert hosted.live == LiveLimits(**HOSTED_DEFAULTS[LiveLimits])
    assert hosted.runs.max_hidden < RunLimits().max_hidden
    assert hosted.live.upload_core_share < LiveLimits().upload_core_share
    own = Hosting.from_env({"SYMLAB_HOSTED": "yes", "SYMLAB_MAX_HIDDEN": "64", "SYMLAB_UPLOAD_CORE_SHARE": "0.5"})
    assert own.runs.max_hidden == 64 and own.live.upload_core_share == 0.5 and own.runs.max_epochs == 10
    assert not Hosting.from_env({"SYMLAB_HOSTED": "0"}).hosted
    assert Hosting.from_env({"SYMLAB_WORKER_THREADS": "0"}).runs.worker_threads == 0


@pytest.mark.parametrize(
    "name, raw",
    [
        ("SYMLAB_MAX_HIDDEN", "lots"),
        ("SYMLAB_MAX_HIDDEN", "0"),
        ("SYMLAB_MAX_RUNS_PER_HOUR", "-3"),
        ("SYMLAB_MAX_EPOCHS", "2.5"),
        ("SYMLAB_UPLOAD_CORE_SHARE", "nan"),
        ("SYMLAB_UPLOAD_CORE_SHARE", "inf"),
        ("SYMLAB_UPLOAD_CORE_SHARE", "0"),
        ("SYMLAB_WORKER_THREADS", "-1"),
    ],
)
def test_unusable_variables_are_named(name, raw):
    with pytest.raises(SettingsError, match=name):
        Hosting.from_env({name: raw})


def test_runs_per_hour_count_the_apps_launches_only(tmp_path):
    registry = Registry(run_kinds(), tmp_path / "runs")
    limits = RunLimits(max_runs_per_hour=2)
    config = MnistConfig(hidden=8, epochs=1, train_subset=500, device="cpu")
    for source in ("app", "app", "cli"):
        registry.create("mnist", config, "cpu", status=FINISHED, source=source)
    with pytest.raises(ValueError, match="2 runs were launched or resumed on this server in the last hour"):
        supervisor.submit(registry, "mnist", config, limits, session="carol")
    assert len(registry.runs()) == 3  # nothing queued
    assert registry.launches_since(0, source="cli") == 1


def app_at(page: str, monkeypatch, env: dict, **query) -> AppTest:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page(page) if page else None
    at.query_params.update(query)
    return at.run()


def test_hosted_pages_show_and_apply_the_caps(monkeypatch, tmp_path):
    env = {"SYMLAB_HOSTED": "1", "SYMLAB_RUNS_DIR": str(tmp_path / "runs")}
    home = app_at("", monkeypatch, env)
    assert not home.exception
    assert any("Shared server" in c.value and "tables: ≤ 20 α × seed runs" in c.value for c in home.sidebar.caption)

    toy = app_at("views/toy.py", monkeypatch, env)
    [player] = [e for e in toy.get("bidi_component") if e.proto.component_name == "symlab_player"]
    played = player_document(player.proto)  # played in the browser: the server's redraw caps are not the toy's
    assert (played["frames"], played["interval_ms"]) == (201, 150)
    toy.text_input(key="toy.alphas").set_value("0.25, 0.5, 0.75").run()
    toy.number_input(key="toy.seeds").set_value(10).run()  # 30 runs: the box shows the 6 seeds the table runs
    assert toy.number_input(key="toy.seeds").value == 6
    assert any("Seeds: 6, not 10" in i.value and "at most 20 runs" in i.value for i in toy.info)
    assert not toy.button(key="toy.run_table").disabled
    toy.text_input(key="toy.alphas").set_value("0.25, 0.5, 0.75, 1").run()  # 24 runs: α values added after
    assert any("cap of 20 runs per table" in w.value for w in toy.warning)
    assert toy.button(key="toy.run_table").disabled

    mnist = app_at("views/mnist.py", monkeypatch, env, hidden="4096")
    assert any(
        "width ≤ 1024" in c.value
        and "≤ 20 estimated CPU-minutes a run" in c.value
        and "≤ 4 launches (resumes included) per browser and 30 on the server per hour" in c.value
        for c in mnist.caption
    )
    assert mnist.query_params["hidden"] == "1024"  # clamped to the hosted cap, with a notice
    assert any("hidden=4096" in w.value for w in mnist.warning)


def test_an_unusable_setting_is_shown_and_the_defaults_apply(monkeypatch):
    at = app_at("views/toy.py", monkeypatch, {"SYMLAB_HOSTED": "1", "SYMLAB_UPLOAD_CORE_SHARE": "many"})
    assert not at.exception
    assert any("SYMLAB_UPLOAD_CORE_SHARE" in e.value and "defaults apply" in e.value for e in at.error)
    # The hosted defaults, not none: the toy's live run trains in the hosted compute worker, played in the browser.
    assert any("Shared server" in c.value and "tables: ≤ 20 α × seed runs" in c.value for c in at.sidebar.caption)
    assert [e for e in at.get("bidi_component") if e.proto.component_name == "symlab_player"]


def test_presentation_mode_hides_the_controls_and_stays_in_the_link(monkeypatch):
    at = app_at("views/modes.py", monkeypatch, {}, present="1", alpha="6.0")
    assert not at.exception
    assert at.query_params["present"] == "1" and at.query_params["alpha"] == "6.0"
    assert any("stSidebar" in h.proto.body and "display: none" in h.proto.body for h in at.get("html"))
    at.button(key="modes.leave_present").click().run()
    assert "present" not in at.query_params and at.query_params["alpha"] == "6.0"
    assert not any("stSidebar" in h.proto.body for h in at.get("html"))
    assert at.toggle(key="modes.present").value is False


def test_presentation_mode_shows_tables_as_large_as_the_page_with_every_row(monkeypatch):
    """The grid draws 13 px text on a canvas and about ten rows: on the projector /methods hid four methods' rows.
    Presentation mode shows HTML tables instead (their text scales with the page: checked in Chromium by
    test_layout.py), every row, each column's configured format written out."""
    usual = app_at("views/methods.py", monkeypatch, {})
    present = app_at("views/methods.py", monkeypatch, {}, present="1")
    assert not present.exception and len(present.dataframe) == 0
    assert [len(table.value) for table in present.table] == [len(frame.value) for frame in usual.dataframe]
    assert max(len(table.value) for table in present.table) > 10


def test_a_projector_table_writes_out_each_columns_configured_kind():
    import pandas as pd
    import streamlit as st

    from views.common import tables

    frame = pd.DataFrame({"run": [1, 2], "done": [0.25, None], "yours": [True, False], "gain": [3.14159, -2.0]})
    shown = tables.for_projector(
        frame,
        {
            "done": st.column_config.ProgressColumn("progress", min_value=0, max_value=1),
            "yours": st.column_config.CheckboxColumn("yours"),
            "gain": st.column_config.NumberColumn(format="%+.1f"),
        },
        hide_index=False,
    )
    assert shown.to_dict("list") == {
        "run": [1, 2],
        "progress": ["25%", "—"],
        "yours": ["✓", ""],
        "gain": ["+3.1", "-2.0"],
    }


def test_the_usual_view_keeps_present_out_of_the_link(monkeypatch):
    at = app_at("views/toy.py", monkeypatch, {})
    assert "present" not in at.query_params
    at.toggle(key="toy.present").set_value(True).run()
    assert at.query_params["present"] == "1"


def test_set_threads_caps_torch_and_every_blas_loaded():
    import scipy.linalg  # noqa: F401  (a BLAS of its own, beside numpy's)
    import torch
    from threadpoolctl import threadpool_info

    from symlab.runs.device import set_threads

    before = set_threads(1)
    try:  # a cap, down to one thread, holds for every library (raising one may not: OpenBLAS keeps its start-up count)
        assert torch.get_num_threads() == 1
        assert {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"} == {1}
    finally:
        set_threads(before)


def shown(at) -> str:
    """Everything a visitor reads on the page: its text elements and its exceptions."""
    kinds = ("caption", "markdown", "error", "warning", "info", "exception", "toast")
    return " ".join(str(element.value) for kind in kinds for element in at.get(kind))


@pytest.mark.parametrize("page", ["views/mnist.py", "views/methods.py"])
def test_a_hosted_page_names_no_database_coordinates(monkeypatch, tmp_path, page):
    """A PostgreSQL registry that could not be reached put its user, host and port in the page's error."""
    env = {
        "SYMLAB_HOSTED": "1",
        "SYMLAB_RUNS_DIR": str(tmp_path / "runs"),
        "SYMLAB_DATABASE_URL": "postgresql://classuser:pw@127.0.0.1:9/coursedb",
    }  # port 9: nobody listens
    at = app_at(page, monkeypatch, env)
    assert not at.exception and at.title
    assert any("the run registry's database" in e.value for e in [*at.error, *at.warning])
    for coordinate in ("classuser", "127.0.0.1", ":9", "port 9", "coursedb", "postgresql://"):
        assert coordinate not in shown(at), coordinate
    monkeypatch.delenv("SYMLAB_HOSTED")  # the host's own server says where it looked
    assert "127.0.0.1" in shown(app_at(page, monkeypatch, {}))


@pytest.mark.parametrize("page", ["views/mnist.py", "views/methods.py"])
def test_a_corrupt_registry_is_a_plain_error_and_the_rest_of_the_page_is_drawn(monkeypatch, tmp_path, page):
    """registry.sqlite3 overwritten with garbage put a traceback with the server's paths on /methods."""
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "registry.sqlite3").write_bytes(b"not a database, and longer than a header would be" * 40)
    at = app_at(page, monkeypatch, {"SYMLAB_HOSTED": "1", "SYMLAB_RUNS_DIR": str(runs)})
    assert not at.exception
    assert any("cannot use the run registry" in e.value and "move it aside" in e.value for e in at.error)
    assert str(tmp_path) not in shown(at) and "Traceback" not in shown(at)
    assert at.title and len(at.tabs) == 2 and at.dataframe  # the page: its results and its runs tab
