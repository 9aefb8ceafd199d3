"""A real headless Chromium driven over the DevTools protocol, for testing ``report.html`` and the viewer.

Debian's ``chromium`` package (installed by ``.ci/run``); the protocol is spoken
with ``websocket-client``. Console messages, uncaught exceptions and browser log
entries (a blocked resource, a Content-Security-Policy violation) of level
error are collected as ``errors``; every request the page makes (the Network
domain's ``requestWillBeSent``, file:// included) as ``requests``.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import websocket

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
#: Seconds to wait for Chromium to start, answer or load: deadlines for a busy machine, not timings.
DEADLINE = 120


def find_chromium() -> str:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    raise RuntimeError(f"no Chromium on PATH (looked for {', '.join(CHROMIUM_NAMES)}); "
                       "install Debian's: apt-get install -y chromium")


class Browser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, profile: Path, width: int = 1280, height: int = 900):
        profile.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [find_chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--remote-debugging-port=0", "--remote-allow-origins=*",
             f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        port = self._port(profile / "DevToolsActivePort")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=DEADLINE) as response:
            pages = [target for target in json.load(response) if target["type"] == "page"]
        self.socket = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=DEADLINE,
                                                  suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")

    def _port(self, path: Path) -> int:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            if path.is_file() and path.read_text().strip():
                return int(path.read_text().splitlines()[0])
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.process.returncode} before listening")
            time.sleep(0.05)
        raise RuntimeError(f"chromium did not open its DevTools port within {DEADLINE} s")

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Call a DevTools method and return its result; events seen meanwhile are kept."""
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self.events.append(message)

    def wait_for(self, event: str, timeout: float = DEADLINE, since: int | None = None) -> dict[str, Any]:
        """The first ``event`` after the ``since``-th one kept (default: from now on)."""
        deadline = time.monotonic() + timeout
        seen = len(self.events) if since is None else since
        while time.monotonic() < deadline:
            for message in self.events[seen:]:
                if message.get("method") == event:
                    return message
            seen = len(self.events)
            self.events.append(json.loads(self.socket.recv()))
        raise TimeoutError(f"no {event} within {timeout} s")

    def open(self, path: Path, fragment: str = "") -> None:
        self.navigate(path.resolve().as_uri() + (f"#{fragment}" if fragment else ""))

    def navigate(self, url: str, timeout: float = DEADLINE) -> None:
        """Go to ``url``; wait for its load event unless only the fragment changed (no new document then)."""
        seen = len(self.events)
        navigation = self.send("Page.navigate", url=url)
        if "errorText" in navigation:
            raise RuntimeError(f"{url}: {navigation['errorText']}")
        if "loaderId" in navigation:
            self.wait_for("Page.loadEventFired", timeout=timeout, since=seen)

    def wait_until(self, condition: str, timeout: float = 90) -> None:
        """Wait, inside the page, until the JavaScript ``condition`` is true (checked every 20 ms of page time)."""
        result = self.send("Runtime.evaluate", awaitPromise=True, returnByValue=True, expression=f"""
            new Promise((resolve, reject) => {{
                const started = performance.now();
                (function check() {{
                    let value = false;
                    try {{ value = ({condition}); }} catch (error) {{ value = false; }}
                    if (value) resolve(true);
                    else if (performance.now() - started > {timeout * 1000}) reject(new Error("timed out"));
                    else setTimeout(check, 20);
                }})();
            }})""")
        if "exceptionDetails" in result:
            raise TimeoutError(f"{condition!r} still false after {timeout} s")

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        """The whole page (not only the window) as a PNG."""
        size = self.send("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        data = self.send("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    @property
    def requests(self) -> list[str]:
        """The URL of every request the pages made since the browser started."""
        return [message["params"]["request"]["url"] for message in self.events
                if message.get("method") == "Network.requestWillBeSent"]

    @property
    def errors(self) -> list[str]:
        found = []
        for message in self.events:
            method, params = message.get("method"), message.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
                found.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Runtime.exceptionThrown":
                found.append(f"exception: {params.get('exceptionDetails')}")
            elif method == "Log.entryAdded" and params["entry"].get("level") in ("error", "warning"):
                found.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
        return found

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (OSError, websocket.WebSocketException, RuntimeError):
            pass
        self.socket.close()
        try:
            self.process.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
