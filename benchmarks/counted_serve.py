"""serve.py, with every script run's CPU written down: what benchmarks/load_test.py starts.

    SYMLAB_RUN_LOG=runs.log streamlit run benchmarks/counted_serve.py

Each run of a session's script (a whole page or a fragment, with the reruns it asked for) appends one line to
``SYMLAB_RUN_LOG``: the session's id, the run's start and end (``time.monotonic()``, the clock the load test's
client shares on this machine), the CPU its thread used (ms) and 1 for a fragment's run, 0 for the page's. The
load test matches each run to the request of that session it followed, which gives CPU per request by kind.
"""

import os
import sys
import threading
import time
from pathlib import Path

import streamlit as st
from streamlit import config
from streamlit.runtime.scriptrunner.script_runner import ScriptRunner

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RUN_LOG = open(os.environ["SYMLAB_RUN_LOG"], "a", buffering=1)  # noqa: SIM115 (open for the server's life)
WRITING = threading.Lock()
script_run = ScriptRunner._run_script


def counted_run(self, rerun_data) -> None:
    start, cpu = time.monotonic(), time.thread_time()
    try:
        script_run(self, rerun_data)
    finally:
        line = (
            f"{self._session_id} {start:.4f} {time.monotonic():.4f} {(time.thread_time() - cpu) * 1000:.3f} "
            f"{int(bool(rerun_data.fragment_id_queue))}\n"
        )
        with WRITING:
            RUN_LOG.write(line)


from symlab.serving import page_process  # noqa: E402

ScriptRunner._run_script = counted_run
app = st.App(str(ROOT / "app.py"), **page_process.start(config.get_option("server.baseUrlPath") or ""))
