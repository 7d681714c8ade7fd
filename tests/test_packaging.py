"""The package's metadata as a wheel would carry it: an OSI licence (MIT, LICENSE at the top), authors and classifiers."""

import email
import os
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_licence_is_declared_and_shipped():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text
    assert project["authors"] and any(c.startswith("Intended Audience") for c in project["classifiers"])


def test_the_wheels_metadata_names_the_licence(tmp_path):
    from setuptools import build_meta

    here = os.getcwd()
    os.chdir(ROOT)  # the backend builds from the working directory
    try:
        info = build_meta.prepare_metadata_for_build_wheel(str(tmp_path))
    finally:
        os.chdir(here)
    metadata = email.message_from_string((tmp_path / info / "METADATA").read_text())
    assert metadata["License-Expression"] == "MIT" and metadata.get_all("License-File") == ["LICENSE"]
    assert (tmp_path / info / "licenses" / "LICENSE").read_text() == (ROOT / "LICENSE").read_text()
    assert "Programming Language :: Python :: 3.11" in metadata.get_all("Classifier")
