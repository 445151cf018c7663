"""Load a page in headless Chromium and report what a person would see: a
screenshot, the console's errors, and whether the page fits the window's width.

Chromium is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
JSON messages separated by NUL bytes on file descriptors 3 and 4), not over a
websocket and not with ``--screenshot``/``--enable-logging``: a pipe needs no port
and no client library, and the protocol reports every kind of console error
(``Runtime.exceptionThrown``, ``console.error``, ``Log.entryAdded`` for a resource
that failed to load, which the stderr log does not show), and it can ask the page
whether it is wider than the window.

Debian's ``chromium`` package, run as root in a container: ``--no-sandbox`` (no
user namespaces there), a fresh ``--user-data-dir`` per browser, and every
background service off so a test makes no network request.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--mute-audio",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)


def find_chromium() -> str | None:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageLoad:
    """What loading one page gave."""

    url: str
    png: bytes
    errors: list[str] = field(default_factory=list)
    scroll_width: int = 0  # document width in CSS pixels
    inner_width: int = 0  # layout viewport width in CSS pixels
    height: int = 0  # document height in CSS pixels
    width: int = 0  # the window's (screen's) width asked for

    @property
    def overflows(self) -> bool:
        """The page is wider than the screen. Compared with the width asked for, not
        the layout viewport: an emulated phone widens that to the content (and
        zooms out) when the page does not fit."""
        return max(self.scroll_width, self.inner_width) > self.width


class ChromiumError(RuntimeError):
    pass


class Chromium:
    """One headless browser; ``load`` pages one after another, then ``close``."""

    def __init__(self, executable: str, *, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="perfcheck-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        # The protocol's descriptors are fixed, 3 in and 4 out: a Python trampoline
        # moves the pipe ends there and execs the browser (no preexec_fn in a
        # threaded pytest; dash cannot redirect descriptors above 9). The ends are
        # first moved above 9, so that neither already is 3 or 4.
        r, w = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_r, from_browser_w))
        os.close(to_browser_r)
        os.close(from_browser_w)
        trampoline = (f"import os, sys; os.dup2({r}, 3); os.dup2({w}, 4); os.close({r}); os.close({w}); "
                      "os.execv(sys.argv[1], sys.argv[1:])")
        self._log = open(Path(self._profile) / "chromium.log", "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-c", trampoline, executable, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            close_fds=True, pass_fds=(r, w),
        )
        os.close(r)
        os.close(w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []

    # --- the pipe -------------------------------------------------------------------

    def _send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self._next_id += 1
        message: dict = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode("utf-8") + b"\0"
        while data:
            data = data[os.write(self._to_browser, data):]
        return self._next_id

    def _receive(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChromiumError(f"no answer from Chromium within {self.timeout:.0f} s")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise ChromiumError(f"Chromium closed the pipe (exit status {self.process.poll()}); "
                                    f"log: {self.log_tail()}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Send a command and wait for its answer; events meanwhile are kept."""
        wanted = self._send(method, params, session)
        deadline = time.monotonic() + self.timeout
        while True:
            message = self._receive(deadline)
            if message.get("id") == wanted:
                if "error" in message:
                    raise ChromiumError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._events.append(message)

    def _wait_event(self, method: str, session: str) -> dict:
        deadline = time.monotonic() + self.timeout
        for i, event in enumerate(self._events):
            if event.get("method") == method and event.get("sessionId") == session:
                return self._events.pop(i)
        while True:
            message = self._receive(deadline)
            if message.get("method") == method and message.get("sessionId") == session:
                return message
            self._events.append(message)

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = (Path(self._profile) / "chromium.log").read_text(errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    # --- pages ----------------------------------------------------------------------

    def load(self, url: str, *, width: int, height: int = 900, full_page: bool = True) -> PageLoad:
        """Open ``url`` in a new tab ``width`` CSS pixels wide and take a screenshot
        (of the whole page with ``full_page``); collect the console's errors."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        try:
            for domain in ("Page", "Runtime", "Log"):
                self.call(f"{domain}.enable", session=session)
            # mobile: the viewport meta tag applies, as on a phone
            metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600}
            self.call("Emulation.setDeviceMetricsOverride", metrics, session=session)
            self._events.clear()
            self.call("Page.navigate", {"url": url}, session=session)
            self._wait_event("Page.loadEventFired", session)
            probe = self.call("Runtime.evaluate", {
                "expression": "JSON.stringify([document.documentElement.scrollWidth, window.innerWidth, "
                              "document.documentElement.scrollHeight])",
                "returnByValue": True,
            }, session=session)
            scroll_width, inner_width, page_height = json.loads(probe["result"]["value"])
            if full_page:
                self.call("Emulation.setDeviceMetricsOverride",
                          {**metrics, "height": int(min(max(page_height, height), 16000))}, session=session)
            shot = self.call("Page.captureScreenshot", {"format": "png"}, session=session)
            # events that arrived with the answers above
            errors = [_error_text(e) for e in self._events if e.get("sessionId") == session]
            return PageLoad(url, base64.b64decode(shot["data"]), [e for e in errors if e],
                            int(scroll_width), int(inner_width), int(page_height), width)
        finally:
            self.call("Target.closeTarget", {"targetId": target})

    def close(self) -> None:
        try:
            if self.process.poll() is None:
                try:
                    self._send("Browser.close")
                    self.process.wait(timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    self.process.kill()
                    self.process.wait(timeout=10)
        finally:
            for fd in (self._to_browser, self._from_browser):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._log.close()
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _error_text(event: dict) -> str | None:
    """The console errors of a DevTools event, as one line; None for anything else."""
    method, params = event.get("method"), event.get("params", {})
    if method == "Runtime.exceptionThrown":
        details = params.get("exceptionDetails", {})
        text = str(details.get("exception", {}).get("description") or details.get("text"))
        return "exception: " + " ".join(text.split())
    if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
        return "console.error: " + " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
    if method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
        entry = params["entry"]
        return f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip()
    return None
