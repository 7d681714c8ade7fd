"""Hostile uploads against a hosted server in Chromium (benchmarks/upload_attacks.py's cases): each ends in its
message, shown as text, while the server's own memory stays near where it started and comes back once a class of
uploaders has left."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CHROMIUM

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import upload_attacks  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# What each case's page shows (its first alert, as text: nothing of the name is read as markup).
EXPECTED = {
    "stride0": "stride0.pt: 0.weight is a view that repeats or overlaps its stored numbers",
    "deflate": "deflate.pt: its archive expands to 1,0",  # 1 GiB of zeros, and the rest
    "chain": "chain.pt: 200 nn.Linear layers, over the 64 this reader takes",
    "nohidden": "nohidden.pt: 0.weight has shape (0, 784): every layer needs at least one input and one unit",
    "markup": upload_attacks.hostile_files.MARKUP_NAME + ": 6 → 5 → 3",
    "wide": "wide.pt: 784 → 5000 → 10",
    "class": "wide.pt: 784 → 5000 → 10",
}
SERVER_GROWTH_MIB = 300  # the server's own memory above its start, at any moment of any case
LEFT_BEHIND_MIB = 150  # what a class of uploaders leaves in it once their sessions are gone


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    """The benchmark's rows, from a process of its own: its Chromium cannot share this one's event loop with the
    suite's browser, and its memory figures are of its server alone."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}")
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "upload_attacks.py"),
            "--cases",
            ",".join(EXPECTED),
            "--students",
            "4",
            "--bomb-gib",
            "1",
            "--session-ttl",
            "2",
            "--leave-wait",
            "20",
            "--timeout",
            "300",
            "--env",
            "SYMLAB_UPLOAD_CORE_SHARE=1",  # hosted in all else: the share paces the analyses, not the memory
            "--files",
            str(tmp_path_factory.mktemp("uploads")),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {row["case"]: row for row in found}


@pytest.mark.parametrize("case", EXPECTED)
def test_a_hostile_upload_ends_in_its_message_with_the_server_near_its_start(rows, case):
    row = rows[case]
    assert all(
        outcome.startswith(("error  " + EXPECTED[case], "check_circle  " + EXPECTED[case]))
        for outcome in row["outcome"].split(" / ")
    ), row
    assert row["server_peak_mib"] - row["server_start_mib"] < SERVER_GROWTH_MIB, row


def test_a_class_that_uploaded_and_left_leaves_the_server_as_it_found_it(rows):
    row = rows["class"]
    assert row["students"] == 4 and row["server_after_mib"] - row["server_start_mib"] < LEFT_BEHIND_MIB, row
