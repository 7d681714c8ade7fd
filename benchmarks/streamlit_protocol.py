"""A Streamlit session spoken at the protocol level: one websocket, the BackMsg / ForwardMsg
protobufs that ship with the ``streamlit`` package, no browser. One process can hold hundreds.

What the browser's frontend does, and this client does too:
  * open a page: a ``rerun_script`` BackMsg whose ClientState names the page (``page_name``), then
    name it by the script hash the server answered with (``navigation``), as later reruns must;
  * move a widget: a ``rerun_script`` carrying the new WidgetStates (every widget this session has
    set so far, as the frontend sends all its widget values);
  * press a button: the same with ``trigger_value``, sent once;
  * play, pause, step or reset an animation played in the browser (views/common/animation.js): the player's state,
    the frame it stands on and whether it plays, as a ``json_value``, sent when a visitor clicks (the frames in
    between are the browser's own);
  * a widget drawn inside a fragment reruns only that fragment (its delta's ``fragment_id``);
  * run ``st.fragment(run_every=...)`` timers: the server announces them with ``auto_rerun`` (and
    cancels them with ``stop_auto_rerun``; the ``new_session`` of a full-app run, one whose run
    identity names no fragment, clears them all), and the
    client sends fragment-scoped reruns (``fragment_id``, ``is_auto_rerun``) at that interval;
  * send back the URL's query string the app last set (``page_info_changed``).

What it measures: for every request, the time from sending it to the ``script_finished`` that
ends the run it caused (a run ending early for a rerun, e.g. ``st.rerun()``, is followed to the
run that replaced it); an exception element in a delta, a run that failed to compile, a page not
found, a closed websocket and a request without an answer within the timeout are errors.

A request whose run drew a progress bar starting with ⏳ waited for a shared computation (training
in the server's worker processes, views/common/computing.py ``computed``): those are also counted apart. Such a run
ends at once with a waiting panel: one the page redraws (a timer, above), or one the browser draws
(views/common/waiting.js), which asks the server's route where the computation stands twice a second, by HTTP with
the session's cookies (``polls``, no page run), and once it is done runs the page again (a ``tick``, carrying the
panel's state as the browser sends it). The result comes with a later full run that draws no ⏳. The time from the
request to that run is the request's *result* time: its own measure, and an error (``timeout``) when it exceeds the
timeout. A request the student replaced by another
before its result came is counted as abandoned.

It keeps one request in flight per session: a fragment tick due while a request is unanswered is
skipped (and counted), so every latency is one request's own; a tick waiting for such a request is
dropped (and counted) if that request's run stopped its timer, as the frontend clears its interval.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

EARLY_FOR_RERUN = ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN
COMPILE_ERROR = ForwardMsg.ScriptFinishedStatus.FINISHED_WITH_COMPILE_ERROR
PENDING = "⏳"  # how a page's progress bar starts while it waits for a shared computation (views/common/computing.py)
WIDGET_TYPES = ("slider", "number_input", "selectbox", "button", "checkbox", "radio", "file_uploader")
PLAYER, PLAYER_COMPONENT = "player", "symlab_player"  # an animation played in the browser: a widget of its own
WAITING, WAITING_COMPONENT = "waiting", "symlab_waiting"  # a waiting panel drawn by the browser: its state, "done"
# An XSRF token of the frontend's form ("2|mask|masked token|time"), sent as the cookie and the header an upload
# needs (the server compares the two): any token will do, as long as both carry the same one.
XSRF_TOKEN = "2|00000000|" + bytes(range(16)).hex() + "|0"


@dataclass
class Widget:
    """A widget as last drawn: its element type, proto and the value this session holds."""

    kind: str
    proto: object
    value: object = None
    fragment_id: str = ""  # the fragment it was drawn in: using it reruns only that fragment
    data: dict | None = None  # a player's: what the page sent it (its animation's id, frame count, ...)

    @property
    def key(self) -> str:
        """The user key Streamlit appends to the widget id (``$$ID-<hash>-<key>``)."""
        return self.proto.id.split("-", 2)[-1] if self.proto.id.startswith("$$ID-") else self.proto.id

    def state(self) -> WidgetState | None:
        """The WidgetState the frontend would send for ``value`` (None: nothing to send)."""
        if self.value is None:
            return None
        state = WidgetState(id=self.proto.id)
        if self.kind == "slider" and self.proto.options:  # st.select_slider: the options' labels
            state.string_array_value.data[:] = [self.proto.options[int(i)] for i in self.value]
        elif self.kind == "slider":
            state.double_array_value.data[:] = list(self.value)
        elif self.kind == "number_input":
            state.double_value = float(self.value)
        elif self.kind in ("selectbox", "radio"):
            state.string_value = self.value
        elif self.kind == "checkbox":
            state.bool_value = bool(self.value)
        elif self.kind == "button":
            state.trigger_value = True
        elif self.kind == "file_uploader":  # the files it holds: UploadedFileInfo protos
            state.file_uploader_state_value.uploaded_file_info.extend(self.value)
        elif self.kind == PLAYER:  # where the browser's player stands (views/common/animation.js)
            state.json_value = json.dumps({"position": self.value})
        elif self.kind == WAITING:  # the computation it waited for is done (views/common/waiting.js)
            state.json_value = json.dumps({"done": self.value})
        return state


def drawn_value(kind: str, proto, held):
    """The value a widget shows after a run: the one the server set (a preset, a clamp), else the
    one this session holds, else the widget's default."""
    if kind == "slider":  # an empty list: the server holds a value the proto does not carry; send none
        if proto.set_value and proto.value:
            return list(proto.value)
        return held if held is not None else list(proto.default) or None
    if kind == "number_input":
        return proto.value if proto.set_value else held if held is not None else proto.default
    if kind in ("selectbox", "radio"):
        if proto.set_value and proto.raw_value:
            return proto.raw_value
        if held is not None:
            return held
        return proto.options[proto.default] if proto.HasField("default") and proto.options else None
    if kind == "checkbox":
        return proto.value if proto.set_value else held if held is not None else proto.default
    if kind == "file_uploader":
        return held
    return None  # buttons hold nothing between runs


def cookies_set_by(headers) -> dict[str, str]:
    """{name: value} of the Set-Cookie ``headers`` of an answer (None: none)."""
    from http.cookies import SimpleCookie

    jar = SimpleCookie()
    for header in headers or []:
        jar.load(header)
    return {name: morsel.value for name, morsel in jar.items()}


def query_values(query: str) -> dict[str, list[str]]:
    import urllib.parse

    return urllib.parse.parse_qs(query, keep_blank_values=True)


@dataclass
class Request:
    what: str
    sent: float
    done: asyncio.Future
    finished: float | None = None
    waited: bool = False  # the run showed a shared computation's progress (views/common/computing.py's PENDING mark)


@dataclass(frozen=True)
class Answered:
    what: str  # open, widget, preset, button or tick
    ms: float  # from sending the request to the end of the run it caused
    waited: bool  # the run waited for a shared computation
    page: str = ""  # the page it was sent on ("" for the home page)
    sent: float = 0.0  # when it was sent (time.monotonic())


@dataclass(frozen=True)
class Result:
    what: str  # the request that asked for the computation
    page: str
    ms: float  # from sending the request to the end of the full run that drew its result


@dataclass
class Session:
    """One simulated browser tab on ``url`` (http://host:port). ``sticky``: it first loads the app's page as a
    browser does and keeps the cookies that answer sets (a proxy's, naming the process it stays on)."""

    url: str
    timeout: float = 15.0
    sticky: bool = False
    reconnect: bool = False  # as the frontend: a dropped connection is opened again, the page run from its link
    answered: list[Answered] = field(default_factory=list)  # every request that got its end of run
    results: list[Result] = field(default_factory=list)  # every computation a request waited for, once drawn
    abandoned: int = 0  # requests that waited, replaced by another request before their result came
    errors: Counter = field(default_factory=Counter)
    messages: dict[str, list[str]] = field(default_factory=dict)
    skipped_ticks: int = 0
    received_bytes: int = 0
    polls: int = 0  # asks of a waiting panel drawn by the browser (HTTP, no page run)

    def __post_init__(self):
        self.widgets: dict[str, Widget] = {}  # by widget id
        self.drawn: set[str] = set()  # widget ids drawn by the full-app run under way
        self.timers: dict[str, float] = {}  # fragment id -> interval (s)
        self.waiting: Widget | None = None  # the waiting panel the browser draws, while the page shows one
        self.asked: Widget | None = None  # the panel last asked about
        self.next_ask = 0.0  # when to ask about it next (time.monotonic())
        self.asking = False  # an ask is under way
        self.query_string = ""
        self.page = ""
        self.page_hash = ""  # the page's script hash, once the server has named it
        self.pending: Request | None = None
        self.awaiting: Request | None = None  # the request whose computation's result has not come yet
        self.run_pending = False  # the run under way drew a ⏳ progress bar
        self.full_run = False  # the run under way is the whole page's (not a fragment's)
        self.socket = None
        self.session_id = ""  # the server's id for this session, which an upload's address names
        self.file_urls: dict[str, asyncio.Future] = {}  # upload request id -> its answer
        self.reader: asyncio.Task | None = None
        self.ticker: asyncio.Task | None = None
        self.closing = False
        self.cookies: dict[str, str] = {}
        self.dropped = False  # the connection closed under this session (its server died)
        self.reconnects = 0
        self.lost_state = 0  # reconnects after which a control no longer showed the value it had
        self.interrupted = 0  # requests whose run the dropped connection cut short

    # ------------------------------------------------------------------ connection

    async def connect(self) -> None:
        if self.sticky and not self.cookies:
            self.cookies = await asyncio.to_thread(self.page_cookies)
        ws_url = self.url.replace("http://", "ws://", 1).rstrip("/") + "/_stcore/stream"
        self.socket = await websockets.connect(
            ws_url,
            subprotocols=["streamlit"],
            max_size=None,
            open_timeout=self.timeout,
            ping_interval=None,
            additional_headers={"Cookie": self.cookie_header()} if self.cookies else None,
        )
        self.cookies.update(cookies_set_by(self.socket.response.headers.get_all("Set-Cookie")))  # a proxy moving it
        self.dropped = False
        for task in (self.ticker, self.reader):
            if task:
                task.cancel()
        self.reader = asyncio.create_task(self.read())
        self.ticker = asyncio.create_task(self.tick())

    async def reconnect_now(self) -> None:
        """What the frontend does once its connection drops: connect again (through a proxy, to a live server) and
        run the page again from its link; a link that then says something else than before (a control moved back,
        a setting dropped) is lost state. The link is the state: the app writes every control into it."""
        before, page = query_values(self.query_string), self.page
        self.widgets, self.timers, self.waiting = {}, {}, None
        self.reconnects += 1
        try:
            await self.connect()
        except (TimeoutError, OSError, websockets.InvalidHandshake) as exc:
            self.dropped = True
            self.error("disconnect", f"reconnect on /{page}: {exc}")
            return
        await self.request("reconnect", self.rerun_message())
        after = query_values(self.query_string)
        lost = {key: (value, after.get(key)) for key, value in before.items() if after.get(key) != value}
        if lost:
            self.lost_state += 1
            self.error("lost_state", f"/{page} after reconnecting: {lost}")

    def page_cookies(self) -> dict[str, str]:
        """The cookies set by the answer to the app's page (index.html), as a browser's first request gets them."""
        import urllib.request

        with urllib.request.urlopen(self.url.rstrip("/") + "/", timeout=self.timeout) as response:
            response.read()
            return cookies_set_by(response.headers.get_all("Set-Cookie"))

    def cookie_header(self, **more: str) -> str:
        return "; ".join(f"{name}={value}" for name, value in {**self.cookies, **more}.items())

    async def close(self) -> None:
        self.closing = True
        for task in (self.ticker, self.reader):
            if task:
                task.cancel()
        if self.socket:
            await self.socket.close()

    def error(self, kind: str, message: str) -> None:
        self.errors[kind] += 1
        kept = self.messages.setdefault(kind, [])
        if len(kept) < 5 and message not in kept:
            kept.append(message[:300])

    # ------------------------------------------------------------------ requests

    async def open(self, page: str, query: str = "") -> float | None:
        """Open ``page`` (its url path; "" for the home page), as a link or the sidebar would (a link
        may carry a ``query`` string, ``a=1&b=2``)."""
        self.page, self.query_string, self.page_hash = page, query, ""
        return await self.request("open", self.rerun_message())

    async def result(self, timeout: float) -> Result | None:
        """The result of the last request that waited for a computation, once its page has drawn it."""
        deadline = time.monotonic() + timeout
        while self.awaiting is not None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return self.results[-1] if self.awaiting is None and self.results else None

    async def set_widget(self, widget: Widget, value, what: str = "widget") -> float | None:
        widget.value = value
        return await self.request(what, self.rerun_message(widget.fragment_id))

    async def upload(self, widget: Widget, name: str, data: bytes, timeout: float) -> float | None:
        """Put a file in an uploader as the frontend does: ask the server where to send it, send it (HTTP PUT), then
        rerun with the uploader holding it; the latency of that run, which reads the file (at most ``timeout`` s)."""
        from streamlit.proto.Common_pb2 import UploadedFileInfo

        msg = BackMsg()
        request_id = f"upload-{len(self.file_urls)}"
        msg.file_urls_request.request_id = request_id
        msg.file_urls_request.file_names.append(name)
        msg.file_urls_request.session_id = self.session_id
        self.file_urls[request_id] = asyncio.get_running_loop().create_future()
        try:
            await self.socket.send(msg.SerializeToString())
            urls = await asyncio.wait_for(self.file_urls[request_id], self.timeout)
            await asyncio.to_thread(self.put_file, urls.upload_url, name, data)
        except (TimeoutError, OSError, websockets.ConnectionClosed) as exc:
            self.error("upload", f"{name} on /{self.page}: {type(exc).__name__}: {exc}")
            return None
        widget.value = [UploadedFileInfo(name=name, size=len(data), file_id=urls.file_id, file_urls=urls)]
        return await self.request("upload", self.rerun_message(widget.fragment_id), timeout)

    def put_file(self, path: str, name: str, data: bytes) -> None:
        """The multipart PUT the frontend sends, with the XSRF cookie and header."""
        import urllib.request

        boundary = "symlab-upload-boundary"
        body = b"".join(
            [
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n".encode(),
                data,
                f"\r\n--{boundary}--\r\n".encode(),
            ]
        )
        request = urllib.request.Request(
            self.url.rstrip("/") + path,
            data=body,
            method="PUT",
            headers={
                "Content-Type": f"multipart/form-data; boundary={boundary}",
                "X-Xsrftoken": XSRF_TOKEN,
                "Cookie": self.cookie_header(_streamlit_xsrf=XSRF_TOKEN),
            },
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            response.read()

    async def press(self, widget: Widget, what: str = "button") -> float | None:
        widget.value = True
        try:
            return await self.request(what, self.rerun_message(widget.fragment_id))
        finally:
            widget.value = None  # a trigger is sent once

    def rerun_message(self, fragment_id: str = "", timer: bool = False) -> bytes:
        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = self.query_string
        state.page_name = self.page
        state.page_script_hash = self.page_hash
        state.fragment_id = fragment_id
        state.is_auto_rerun = timer
        widgets = [w.state() for w in self.widgets.values()]
        state.widget_states.widgets.extend(w for w in widgets if w is not None)
        return msg.SerializeToString()

    async def request(
        self, what: str, payload: bytes | Callable[[], bytes | None], timeout: float | None = None
    ) -> float | None:
        """Send one rerun and wait for the end of the run it caused (at most ``timeout`` s, default the
        session's); its latency in ms (None: an error, already counted, or a timer's tick that no longer
        applies). A callable ``payload`` is made once the request in flight has ended: a timer's tick, which
        that request's run may have cancelled (None)."""
        timeout = timeout or self.timeout
        if self.dropped and self.reconnect and what != "reconnect":
            await self.reconnect_now()
            if self.dropped:
                return None
        while self.pending is not None:  # a fragment tick in flight: wait for it, as one request at a time
            await asyncio.wait([self.pending.done], timeout=self.timeout)
            if self.pending is not None and not self.pending.done.done():
                break
        if callable(payload):
            payload = payload()
            if payload is None:
                self.skipped_ticks += 1
                return None
        request = Request(what, time.monotonic(), asyncio.get_running_loop().create_future())
        if what != "tick" and self.awaiting is not None:  # the student moved on before the result came
            self.abandoned += 1
            self.awaiting = None
        self.pending = request
        try:
            await self.socket.send(payload)
            await asyncio.wait_for(asyncio.shield(request.done), timeout)
        except TimeoutError:
            self.error("timeout", f"{what} on /{self.page}: no end of run within {timeout:g} s")
            return None
        except websockets.ConnectionClosed as exc:
            if self.reconnect and not self.closing:
                self.interrupted += 1  # counted apart; the next request connects again
            elif not self.closing:  # the student's time is up: a tick in flight then is no one's wait
                self.error("disconnect", f"{what} on /{self.page}: {exc}")
            return None
        finally:
            if self.pending is request:
                self.pending = None
        ms = (request.finished - request.sent) * 1000
        self.answered.append(Answered(what, ms, request.waited, self.page, request.sent))
        if request.waited and what != "tick":
            self.awaiting = request
        return ms

    def check_result_time(self) -> None:
        """A result still not drawn after the timeout is an error, as an unanswered request is."""
        if self.awaiting is not None and time.monotonic() - self.awaiting.sent > self.timeout:
            self.error("timeout", f"{self.awaiting.what} on /{self.page}: result not shown within {self.timeout:g} s")
            self.awaiting = None

    async def tick(self) -> None:
        """The frontend's run_every timers: one fragment rerun per interval per timer; and the asks of a waiting
        panel the browser draws, one per its interval, the next once the last is answered."""
        next_due: dict[str, float] = {}
        while True:
            await asyncio.sleep(0.05)
            self.check_result_time()
            now = time.monotonic()
            panel = self.waiting
            if panel is not None and not self.asking:
                if self.asked is not panel:  # a panel drawn anew: its first ask an interval on
                    self.asked, self.next_ask = panel, now + panel.data["interval_ms"] / 1000
                elif now >= self.next_ask:
                    self.asking = True
                    asyncio.create_task(self.ask(panel))
            for fragment_id, interval in list(self.timers.items()):
                due = next_due.setdefault(fragment_id, now + interval)
                if now < due:
                    continue
                next_due[fragment_id] = now + interval
                if self.pending is not None:
                    self.skipped_ticks += 1
                    continue
                asyncio.create_task(self.request("tick", functools.partial(self.timer_message, fragment_id)))
            for gone in set(next_due) - set(self.timers):
                del next_due[gone]

    async def ask(self, panel: Widget) -> None:
        """One ask of the browser's waiting panel (views/common/waiting.js): where its computation stands, by HTTP
        with the session's cookies; done (or unknown to the process, a 404), the page runs again with the panel's
        state saying so, as the browser runs it."""
        try:
            answer = await asyncio.to_thread(self.ask_server, panel.data["url"])
        finally:
            self.asking = False
        self.polls += 1
        if self.waiting is not panel:
            return
        interval = panel.data["interval_ms"] / 1000
        if answer is None:  # out of reach a moment: the browser asks again, later
            self.next_ask = time.monotonic() + 2 * interval
            return
        if not answer.get("done"):
            self.next_ask = time.monotonic() + interval
            return
        self.waiting = None
        panel.value = panel.data["token"]
        await self.request("tick", self.rerun_message(panel.fragment_id))

    def ask_server(self, path: str) -> dict | None:
        """The JSON answer of the server (or its proxy) to ``path``, asked with this session's cookies; None where
        it cannot be reached."""
        import urllib.error
        import urllib.request

        request = urllib.request.Request(self.url.rstrip("/") + path, headers={"Cookie": self.cookie_header()})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            return {"done": True} if error.code == 404 else None
        except (OSError, ValueError):
            return None

    def timer_message(self, fragment_id: str) -> bytes | None:
        """A timer's rerun of its fragment, made when it is sent: None once a run since the timer fired has
        stopped it (a full-app run of another page, a player that paused), as the frontend clears its
        interval then; the server would drop a rerun of a fragment that run removed, and never answer."""
        return self.rerun_message(fragment_id, timer=True) if fragment_id in self.timers else None

    # ------------------------------------------------------------------ messages

    async def read(self) -> None:
        try:
            async for data in self.socket:
                self.received_bytes += len(data)
                msg = ForwardMsg()
                msg.ParseFromString(data)
                self.handle(msg)
        except websockets.ConnectionClosed as exc:
            if self.reconnect and not self.closing:
                self.dropped = True
            elif not self.closing:
                self.error("disconnect", f"on /{self.page}: {exc}")
        if self.reconnect and not self.closing:  # closed cleanly under it: dropped all the same
            self.dropped = True
        if self.pending is not None and not self.pending.done.done():
            self.pending.done.set_exception(websockets.ConnectionClosedError(None, None))

    def handle(self, msg: ForwardMsg) -> None:
        kind = msg.WhichOneof("type")
        if kind == "delta":
            self.handle_delta(msg)
        elif kind == "navigation":
            self.page_hash = msg.navigation.page_script_hash
        elif kind == "file_urls_response":
            response = msg.file_urls_response
            answer = self.file_urls.get(response.response_id)
            if answer is not None and not answer.done():
                if response.file_urls:
                    answer.set_result(response.file_urls[0])
                else:
                    answer.set_exception(OSError(response.error_msg or "no address for the upload"))
        elif kind == "new_session":
            self.session_id = msg.new_session.initialize.session_id or self.session_id
            self.run_pending = False
            self.full_run = not msg.metadata.run.fragment_ids
            if self.full_run:
                self.timers.clear()  # a full-app run re-announces the timers it keeps
                self.waiting = None  # and draws again the browser's waiting panel it keeps
                self.drawn = set()
        elif kind == "auto_rerun":
            self.timers[msg.auto_rerun.fragment_id] = msg.auto_rerun.interval
        elif kind == "stop_auto_rerun":
            for fragment_id in msg.stop_auto_rerun.fragment_ids:
                self.timers.pop(fragment_id, None)
        elif kind == "page_info_changed":
            self.query_string = msg.page_info_changed.query_string
        elif kind == "page_not_found":
            self.error("page_not_found", f"/{self.page}: {msg.page_not_found.page_name}")
        elif kind == "script_finished":
            status = msg.script_finished
            if status == COMPILE_ERROR:
                self.error("exception", f"/{self.page}: the script failed to compile")
            if status == ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY:
                # As the frontend does: widgets a full run did not draw are gone, their values with them.
                self.widgets = {id_: w for id_, w in self.widgets.items() if id_ in self.drawn}
                if (
                    self.full_run
                    and not self.run_pending
                    and self.awaiting is not None
                    and (self.pending is None or self.pending is not self.awaiting)
                ):
                    self.results.append(
                        Result(self.awaiting.what, self.page, (time.monotonic() - self.awaiting.sent) * 1000)
                    )
                    self.awaiting = None
            if status != EARLY_FOR_RERUN and self.pending is not None and not self.pending.done.done():
                self.pending.finished = time.monotonic()
                self.pending.done.set_result(status)

    def handle_delta(self, msg: ForwardMsg) -> None:
        if msg.delta.WhichOneof("type") != "new_element":
            return
        element = msg.delta.new_element
        kind = element.WhichOneof("type")
        if kind == "progress" and element.progress.text.startswith(PENDING):
            self.run_pending = True
            if self.pending is not None:
                self.pending.waited = True
        elif kind == "exception":
            exc = element.exception
            if not exc.is_warning:
                self.error("exception", f"/{self.page}: {exc.type}: {exc.message}")
        elif kind == "bidi_component" and element.bidi_component.component_name == WAITING_COMPONENT:
            proto = element.bidi_component
            self.drawn.add(proto.id)
            self.run_pending = True  # as a ⏳ bar: the run waits for a computation
            if self.pending is not None:
                self.pending.waited = True
            self.waiting = Widget(WAITING, proto, None, msg.delta.fragment_id, json.loads(proto.bytes or proto.json))
            self.widgets[proto.id] = self.waiting
        elif kind == "bidi_component" and element.bidi_component.component_name == PLAYER_COMPONENT:
            proto = element.bidi_component
            self.drawn.add(proto.id)
            # The page sends its player's document as JSON bytes (views/common/animation.py).
            document = json.loads(proto.bytes or proto.json)
            self.widgets[proto.id] = Widget(PLAYER, proto, None, msg.delta.fragment_id, document)
        elif kind in WIDGET_TYPES:
            proto = getattr(element, kind)
            held = self.widgets.get(proto.id)
            self.drawn.add(proto.id)
            self.widgets[proto.id] = Widget(
                kind, proto, drawn_value(kind, proto, held.value if held else None), msg.delta.fragment_id
            )

    # ------------------------------------------------------------------ the page as drawn

    def widget(self, key_suffix: str) -> Widget | None:
        """The drawn widget whose key ends with ``key_suffix`` (e.g. ".play")."""
        return next((w for w in self.widgets.values() if w.key.endswith(key_suffix)), None)

    def player(self) -> Widget | None:
        """The animation played in the browser, where the page draws one."""
        return next((w for w in self.widgets.values() if w.kind == PLAYER), None)

    async def play(self, player: Widget, playing: bool, frame: int = 0) -> float | None:
        """Play (from ``frame``) or pause (at ``frame``) the browser's player, as a click on it tells the page."""
        frame = min(max(int(frame), 0), player.data["frames"] - 1)
        return await self.set_widget(player, {"id": player.data["id"], "frame": frame, "playing": playing}, "button")

    def controls(self) -> list[Widget]:
        """Sliders and number boxes a student can nudge (enabled, with a range)."""
        return [
            w
            for w in self.widgets.values()
            if w.kind in ("slider", "number_input")
            and not w.proto.disabled
            and w.value is not None
            and not getattr(w.proto, "options", None)
            and (w.kind == "slider" or (w.proto.has_min and w.proto.has_max))
        ]
