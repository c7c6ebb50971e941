"""A headless Chromium driven over the Chrome DevTools Protocol: open a page, run script, screenshot.

What the report's browser test and `benchmarks/report_shot.py` need, and nothing more: Debian's
`chromium` (never a browser downloaded at run time) started headless in a fresh profile with the flags
that keep it off the network, and a synchronous CDP client on `websocket-client`. The page's console
errors, uncaught exceptions and every request it makes are recorded, so a test can assert that a report
renders cleanly and offline.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Flags for a headless Chromium that stays off the network (no sync, updates, QUIC or first-run pages).
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio")


class BrowserError(RuntimeError):
    """Chromium could not be started or driven; the message says what to install or check."""


def find_chromium() -> str | None:
    """The Chromium to use: `$PPOGA_CHROMIUM`, else `chromium` / `chromium-browser` on PATH; None when absent."""
    given = os.environ.get("PPOGA_CHROMIUM")
    if given:
        return given
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Page:
    """One browser tab over CDP: `call` a method, `evaluate` script; events are kept in `events`."""

    socket: Any
    events: list[dict[str, Any]] = field(default_factory=list)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def call(self, method: str, timeout: float = 30.0, **params: Any) -> dict[str, Any]:
        number = next(self._ids)
        self.socket.send(json.dumps({"id": number, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.socket.settimeout(max(0.1, deadline - time.monotonic()))
            message = json.loads(self.socket.recv())
            if message.get("id") == number:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error'].get('message')}")
                return message.get("result") or {}
            if "method" in message:
                self.events.append(message)
        raise BrowserError(f"{method}: no answer from Chromium in {timeout:.0f} s")

    def evaluate(self, expression: str, timeout: float = 30.0) -> Any:
        """The value of a script expression (promises awaited); a script exception raises BrowserError."""
        result = self.call("Runtime.evaluate", timeout=timeout, expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"script failed: {result['exceptionDetails'].get('text')}: "
                               f"{(result['exceptionDetails'].get('exception') or {}).get('description')}")
        return (result.get("result") or {}).get("value")

    def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        """Poll a script expression until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        raise BrowserError(f"timed out after {timeout:.0f} s waiting for {expression}")

    def goto(self, url: str, timeout: float = 60.0) -> None:
        """Open `url` and wait until its load event fired."""
        self.events.clear()
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            if time.monotonic() > deadline:
                raise BrowserError(f"{url} did not finish loading in {timeout:.0f} s")
            self.call("Runtime.evaluate", expression="1")  # drains the events that arrived meanwhile

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries seen since the last `goto`."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params") or {}
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append("console: " + " ".join(str(a.get("value", a.get("description", "")))
                                                    for a in params.get("args") or []))
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails") or {}
                found.append("exception: " + str((details.get("exception") or {}).get("description")
                                                 or details.get("text")))
            elif method == "Log.entryAdded" and (params.get("entry") or {}).get("level") == "error":
                found.append("log: " + str(params["entry"].get("text")))
        return found

    def requests(self) -> list[str]:
        """The URLs the page requested since the last `goto`."""
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def screenshot(self, path: Path, *, width: int = 1400, height: int = 1000, full_page: bool = False) -> Path:
        """A PNG of the page at `width` x `height` CSS pixels (the whole page's height with `full_page`)."""
        if full_page:
            height = int(self.evaluate("Math.ceil(document.documentElement.scrollHeight)") or height)
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        time.sleep(0.3)  # let responsive plots redraw at the new size
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=full_page)["data"]
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path


@contextmanager
def chromium_page(*, chromium: str | None = None, startup_timeout: float = 60.0) -> Iterator[Page]:
    """A headless Chromium in a fresh, empty profile, and one tab of it; both closed on exit."""
    import websocket

    binary = chromium or find_chromium()
    if not binary:
        raise BrowserError("no Chromium found: install Debian's `chromium` package (apt-get install chromium) "
                           "or set PPOGA_CHROMIUM to its path")
    profile = tempfile.mkdtemp(prefix="ppoga-chromium-")
    process = subprocess.Popen([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
                                "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    socket = None
    try:
        port = _devtools_port(Path(profile), process, startup_timeout)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as reply:  # loopback only
            targets = json.load(reply)
        target = next(t for t in targets if t.get("type") == "page")
        socket = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        page = Page(socket)
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.call(f"{domain}.enable")
        yield page
    finally:
        if socket is not None:
            socket.close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(profile, ignore_errors=True)


def _devtools_port(profile: Path, process: subprocess.Popen, timeout: float) -> int:
    """The port Chromium chose, from the `DevToolsActivePort` file it writes into the profile."""
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BrowserError(f"Chromium exited at start with code {process.returncode}")
        if marker.exists():
            lines = marker.read_text(encoding="utf-8").split()
            if lines:
                return int(lines[0])
        time.sleep(0.1)
    raise BrowserError(f"Chromium did not open its DevTools port in {timeout:.0f} s")
