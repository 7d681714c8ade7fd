"""The Dockerfile's own install and start commands, run in a fresh virtual environment: the package (``pip install
.``) works away from the checkout, and the app starts healthy.

No image can be built here (no base image is reachable), so this runs what the image would: its
``pip`` steps, then its ``CMD`` with its ``ENV``, and checks the app answers its ``HEALTHCHECK``.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import ROOT, _free_port

pytestmark = [pytest.mark.deploy, pytest.mark.slow]
# The container's user and volume, and its Debian packages (HAProxy: the tests' prerequisites install it here).
IMAGE_ONLY_STEPS = ("useradd ", "apt-get ")


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(instruction, arguments) pairs, continuation lines joined, comments dropped."""
    lines = [line for line in (ROOT / "Dockerfile").read_text().splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    return [tuple(line.split(None, 1)) for line in joined.splitlines() if line.strip()]


def image_environment(instructions) -> dict:
    env = {}
    for instruction, arguments in instructions:
        if instruction in ("ARG", "ENV"):
            for word in shlex.split(arguments):
                name, _, value = word.partition("=")
                env[name] = value
    return env


def test_the_dockerfile_installs_and_starts_a_healthy_app(tmp_path, haproxy):
    instructions = dockerfile_instructions()
    env = image_environment(instructions)
    assert env["SYMLAB_HOSTED"] == "1" and "TORCH_INDEX_URL" in env
    # This machine reaches only its package registry, which serves torch's CPU build: the
    # documented empty value of the build argument.
    env["TORCH_INDEX_URL"] = ""
    env["SYMLAB_RUNS_DIR"] = str(tmp_path / "runs")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, **env, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "VIRTUAL_ENV": str(venv)}

    steps = [arguments for instruction, arguments in instructions if instruction == "RUN"]
    installs = [step for step in steps if not step.startswith(IMAGE_ONLY_STEPS)]
    assert installs and all(step.startswith("pip ") for step in installs), steps
    for step in installs:
        done = subprocess.run(["bash", "-c", step], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"{step}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    torch_build = subprocess.run(
        ["python", "-c", "import torch; print(torch.__version__)"], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert torch_build.startswith("2.13.0")
    # The package itself, away from the checkout: its command, and its shipped data found inside it.
    installed = subprocess.run(
        ["python", "-c", "import symlab.lib.shipped as s; print(s.shipped('mnist'))"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert installed.startswith(str(venv)) and "site-packages/symlab/assets/mnist" in installed
    sweep = subprocess.run(["symlab", "modes", "--json"], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert sweep.returncode == 0, sweep.stderr
    assert json.loads(sweep.stdout)["threshold_over_sigma"] == pytest.approx(4.82, abs=0.01)

    port = str(_free_port())
    command = json.loads(dict(instructions)["CMD"])
    command = [word.replace("8501", port) for word in command]
    health_command = dict(instructions)["HEALTHCHECK"].split(" CMD ", 1)[1].replace("8501", port)
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while subprocess.run(["bash", "-c", health_command], env=env, capture_output=True).returncode != 0:
            assert server.poll() is None, server.stdout.read().decode(errors="replace")
            assert time.monotonic() < deadline, "no healthy answer within 90 s"
            time.sleep(1)
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5).read() == b"ok"
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5)
        assert b"<title>Streamlit</title>" in page.read()
        assert page.headers["X-Symlab-Page"] in ("page1", "page2")  # through the class server's proxy
    finally:
        server.terminate()
        server.wait(timeout=20)
