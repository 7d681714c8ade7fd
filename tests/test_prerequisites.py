"""tests/prerequisites.py: what the selected tests need is found, installed, or named in one line."""

import os
import subprocess
import sys

import prerequisites
import pytest


def need(found: bool, **changes) -> prerequisites.Need:
    fields = dict(
        name="widget",
        why="the widget tests",
        fixtures=frozenset({"widget"}),
        present=lambda: found,
        debian=("widget-pkg",),
    )
    return prerequisites.Need(**{**fields, **changes})


def test_only_the_needs_of_the_selected_tests_that_are_missing_count(monkeypatch):
    monkeypatch.setattr(prerequisites, "NEEDS", (need(False), need(True, name="gadget", fixtures=frozenset({"g"}))))
    assert [n.name for n in prerequisites.missing({"widget", "tmp_path"})] == ["widget"]
    assert prerequisites.missing({"g", "tmp_path"}) == [] and prerequisites.missing({"tmp_path"}) == []


def test_without_leave_to_install_it_stops_with_one_line(monkeypatch):
    monkeypatch.setenv("SYMLAB_TEST_INSTALL", "0")
    line = prerequisites.install([need(False)])
    assert (
        line
        == "missing widget (the widget tests): install them (apt-get install -y widget-pkg), or deselect those tests"
    )
    monkeypatch.setenv("SYMLAB_TEST_INSTALL", "1")
    monkeypatch.setattr(prerequisites.os, "geteuid", lambda: 1000)
    line = prerequisites.install([need(False)])
    assert "\n" not in line and "not root with apt-get" in line and "apt-get install -y widget-pkg" in line


def test_it_installs_with_apt_and_pip_and_says_so(monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(prerequisites.os, "geteuid", lambda: 0)
    monkeypatch.setattr(prerequisites.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(
        prerequisites.subprocess,
        "run",
        lambda step, **_: ran.append(step) or subprocess.CompletedProcess(step, 0, "", ""),
    )
    monkeypatch.setattr(prerequisites.sys, "__stderr__", prerequisites.sys.stdout)
    needs = [need(False), need(False, name="libs", debian=(), pip="req.txt")]
    assert (
        prerequisites.install(needs)
        == "installed, but still missing widget (the widget tests), libs (the widget tests)"
    )
    assert (
        ran[0] == ["apt-get", "update", "-qq"]
        and ran[1][-1] == "widget-pkg"
        and ran[2][-2:] == ["-r", str(prerequisites.ROOT / "req.txt")]
    )
    assert capsys.readouterr().out.startswith("installing widget (the widget tests), libs (the widget tests): ")


def test_a_failed_install_is_one_line(monkeypatch):
    monkeypatch.setattr(prerequisites.os, "geteuid", lambda: 0)
    monkeypatch.setattr(prerequisites.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(
        prerequisites.subprocess,
        "run",
        lambda step, **_: subprocess.CompletedProcess(step, 100, "", "E: Unable to locate package widget-pkg\n"),
    )
    line = prerequisites.install([need(False)])
    assert line == (
        "could not install widget (the widget tests): `apt-get update -qq` failed "
        "(E: Unable to locate package widget-pkg)"
    )


@pytest.mark.parametrize("fixture", ["page", "postgres_server_url", "fonts_installed", "bnn_libraries"])
def test_every_need_is_tied_to_the_fixtures_that_use_it(fixture):
    assert any(fixture in n.fixtures for n in prerequisites.NEEDS)


@pytest.mark.slow  # two pytest processes of its own
def test_collecting_alone_installs_nothing(tmp_path):
    """`pytest --collect-only` runs no test, so it neither installs nor stops for a missing prerequisite: with
    Chromium pointed nowhere and installing forbidden, collecting the browser tests still succeeds, while running
    them stops with the one line."""
    env = {**os.environ, "SYMLAB_CHROMIUM": str(tmp_path / "no-chromium"), "SYMLAB_TEST_INSTALL": "0"}
    root = prerequisites.ROOT
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/test_browser.py"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "tests/test_browser.py"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 4 and "missing chromium" in ran.stdout + ran.stderr
