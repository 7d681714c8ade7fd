"""The class server (``symlab serve``, symlab/serving/proxy.py): page processes behind HAProxy, each browser kept on
one by a cookie, a dead process's browsers sent to a live one with their state, the dead process started again."""

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from class_server import class_server

from symlab.cli import build_parser
from symlab.serving import proxy, warmup

PAGE_PORTS = proxy.page_processes(3, 9101)


def fetch(url: str, cookie: str | None = None) -> tuple[str | None, str | None]:
    """GET ``url``: (the page process that answered, the proxy cookie it set, if any)."""
    request = urllib.request.Request(url, headers={"Cookie": f"{proxy.PROXY_COOKIE}={cookie}"} if cookie else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
        set_cookie = response.headers.get("Set-Cookie") or ""
        found = re.search(rf"{proxy.PROXY_COOKIE}=(\w+)", set_cookie)
        return response.headers.get(proxy.PROCESS_HEADER), found.group(1) if found else None


# ------------------------------------------------------------------------------------ without a server


def test_the_proxy_configuration_is_one_haproxy_accepts(haproxy, tmp_path):
    config = proxy.haproxy_config("127.0.0.1", 9100, PAGE_PORTS)
    path = tmp_path / "haproxy.cfg"
    path.write_text(config)
    checked = subprocess.run([haproxy, "-c", "-f", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    for process in PAGE_PORTS:  # each one checked, and named by its cookie
        assert f"server {process.name} 127.0.0.1:{process.port} check cookie {process.name}" in config
    assert "balance leastconn" in config and "option redispatch" in config and "source" not in config


def test_page_processes_share_a_cookie_secret_and_only_the_first_guesses_in_idle_time():
    environments = [proxy.page_environment(index, "s3cret", {"PATH": "/bin"}) for index in range(3)]
    assert {env["STREAMLIT_SERVER_COOKIE_SECRET"] for env in environments} == {"s3cret"}
    assert [env.get("SYMLAB_IDLE_WORKERS") for env in environments] == [None, "0", "0"]
    chosen = proxy.page_environment(1, "s3cret", {"SYMLAB_IDLE_WORKERS": "1"})
    assert chosen["SYMLAB_IDLE_WORKERS"] == "1"  # the host's choice stands


def test_without_haproxy_serve_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(proxy.shutil, "which", lambda *args, **kwargs: None)
    with pytest.raises(proxy.ProxyMissing, match="apt-get install haproxy"):
        proxy.ClassServer(2)


def test_serve_takes_replicas_ports_and_warm(capsys):
    args = build_parser().parse_args(["serve", "--replicas", "3", "--port", "9000", "--warm"])
    assert (args.replicas, args.port, args.warm, args.first_page_port) == (3, 9000, True, 8601)
    assert build_parser().parse_args(["serve"]).replicas is None  # one per core, decided when it starts
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--replicas", "0"])
    assert "must be >= 1" in capsys.readouterr().err
    assert build_parser().parse_args(["warm", "--json"]).json


def test_a_process_that_dies_is_started_again_ever_more_slowly(haproxy, monkeypatch):
    said = []
    server = proxy.ClassServer(1, port=9100, first_page_port=9101, say=said.append)
    dying = proxy._Child(PAGE_PORTS[0], [sys.executable, "-c", "pass"], dict(os.environ))
    server.children = [dying]
    clock = [1000.0]
    monkeypatch.setattr(proxy.time, "monotonic", lambda: clock[0])
    delays = []
    try:
        for _ in range(3):
            server._launch(dying)
            dying.popen.wait()
            server.check_once()  # seen dead: a restart is scheduled
            delays.append(dying.restart_at - clock[0])
            server.check_once()  # not yet due
            assert server.restarts == len(delays) - 1
            clock[0] = dying.restart_at
            server.check_once()  # due: started again
            assert server.restarts == len(delays)
            dying.popen.wait()
        assert delays == list(proxy.RESTART_BACKOFF_SECONDS[:3])
        clock[0] += proxy.STEADY_SECONDS + 1  # it lived long this time: the back-off starts over
        dying.started = clock[0] - proxy.STEADY_SECONDS - 1
        server.check_once()
        assert dying.restart_at - clock[0] == proxy.RESTART_BACKOFF_SECONDS[0]
        assert any("exited with code 0" in line for line in said)
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------- with a server


@pytest.fixture(scope="module")
def served(haproxy):
    with class_server(replicas=2) as server:
        yield server


@pytest.mark.slow
def test_new_browsers_spread_over_the_processes_and_each_stays_on_its_own(served):
    first_visits = [fetch(served.url + "/") for _ in range(4)]
    assert {process for process, _ in first_visits} == {"page1", "page2"}
    for process, cookie in first_visits:
        assert cookie == process  # the cookie names the process that answered
        for path in ("/modes", "/_stcore/health", "/toy?seed=3"):
            assert fetch(served.url + path, cookie) == (process, None)  # kept there, no new cookie


@pytest.mark.slow
def test_pages_run_through_the_proxy_on_the_process_of_their_cookie(served):
    stream = served.url.replace("http://", "ws://") + "/_stcore/stream"
    for process in ("page1", "page2"):
        seconds = warmup.visit_pages(stream, ["", "modes"], timeout=60, headers={"Cookie": f"symlab_page={process}"})
        assert set(seconds) == {"", "modes"}


@pytest.mark.slow
def test_a_killed_process_sends_its_browsers_to_a_live_one_and_is_started_again(served):
    victim = served.pids()["page2"]
    os.kill(victim, signal.SIGKILL)
    # At once, and until page2 is back, no request fails: the proxy retries on page1 and tells the browser so.
    assert fetch(served.url + "/modes", "page2") == ("page1", "page1")
    answered = []
    while "page2: started again" not in served.log():
        answered.append(fetch(served.url + "/modes", "page2"))
        time.sleep(0.1)
    assert set(answered) <= {("page1", "page1")}
    served.wait_for_line("page2: started again", timeout=30)
    assert served.pids()["page2"] != victim
    deadline = time.monotonic() + 120
    while fetch(served.url + "/", "page2")[0] != "page2":  # back in service once it answers its health check
        assert time.monotonic() < deadline, served.log()[-3000:]
        time.sleep(0.5)


@pytest.mark.slow
def test_a_student_whose_process_dies_keeps_their_page_in_chromium(browser, served):
    """A browser on a page whose process is killed reconnects through the proxy to a live process and shows the
    same state, read from its link."""
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        page.set_default_timeout(60_000)
        page.goto(f"{served.url}/modes?alpha=3.0&sigma=0.5&dim=2&forward=1")
        thumb = page.locator('[data-testid="stSliderThumbValue"]').first
        thumb.wait_for()
        assert thumb.inner_text() == "3.00"
        slider = page.get_by_role("slider").first
        slider.focus()
        page.keyboard.press("End")  # α to its maximum: the link now says alpha=20.0
        page.wait_for_url(re.compile(r"alpha=20\.0"))
        (own,) = [c["value"] for c in context.cookies() if c["name"] == proxy.PROXY_COOKIE]
        os.kill(served.pids()[own], signal.SIGKILL)
        other = {"page1": "page2", "page2": "page1"}[own]  # the page stays; its frontend reconnects by itself
        deadline = time.monotonic() + 60
        while [c["value"] for c in context.cookies() if c["name"] == proxy.PROXY_COOKIE] != [other]:
            assert time.monotonic() < deadline, "the browser was not moved to the live process"
            page.wait_for_timeout(250)
        page.wait_for_function(
            "() => { const t = document.querySelector('[data-testid=\"stSliderThumbValue\"]');"
            " return t && t.innerText === '20.00'; }"
        )
        assert "alpha=20.0" in page.url and "sigma=0.5" in page.url and "forward=1" in page.url
        # The chart is drawn after the controls (its result may come from the compute workers first): wait for it.
        page.locator("text=q (forward KL)").first.wait_for()
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        context.close()
