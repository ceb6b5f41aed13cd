"""A page opened in real headless Chromium, driven over the DevTools protocol on a pipe.

`--remote-debugging-pipe` makes Chromium read protocol commands from fd 3 and
write replies and events to fd 4, NUL-terminated JSON: the standard library is
enough, no WebSocket client or driver binary. `open_page` loads a file, waits
for its load event and reports what a person would notice: console errors and
uncaught exceptions, every image's decoded size, and a full-page screenshot.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class PageLoad:
    errors: list[str]  # console errors, uncaught exceptions, failed loads
    images: list[dict[str, Any]]  # per <img>: complete, naturalWidth, naturalHeight, alt
    title: str
    screenshot: bytes  # PNG of the whole page


class _Pipe:
    def __init__(self, browser: str) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire() -> None:  # in the child: the two ends on the fds Chromium expects
            # through fresh copies: a pipe end may already be fd 3 or 4 (then dup2 would do
            # nothing and leave it close-on-exec) or be the other one's target
            ends = [os.dup(to_chrome_r), os.dup(from_chrome_w)]
            os.dup2(ends[0], 3)  # inheritable, unlike the pipe's own fds
            os.dup2(ends[1], 4)

        self._profile = tempfile.TemporaryDirectory(prefix="retrace-chromium-")
        self.process = subprocess.Popen(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--remote-debugging-pipe", f"--user-data-dir={self._profile.name}",
             "--window-size=1200,900"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire, close_fds=False,  # fds 3 and 4 exist only after `wire`
        )  # fmt: skip
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Send a command and wait for its reply (events meanwhile go to `events`)."""
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        while True:
            reply = self.receive()
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def receive(self, deadline: float = 60.0) -> dict[str, Any]:
        end = time.monotonic() + deadline
        while b"\0" not in self._buffer:
            if time.monotonic() > end:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def wait_for(self, method: str, session: str) -> None:
        while not any(
            e.get("method") == method and e.get("sessionId") == session for e in self.events
        ):
            self.events.append(self.receive())

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, OSError):
            self.send("Browser.close")
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)
        self._profile.cleanup()


def open_page(browser: str, page: Path) -> PageLoad:
    pipe = _Pipe(browser)
    try:
        target = pipe.send("Target.createTarget", url="about:blank")["targetId"]
        session = pipe.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            pipe.send(f"{domain}.enable", session)
        pipe.send("Page.navigate", session, url=page.resolve().as_uri())
        pipe.wait_for("Page.loadEventFired", session)
        script = (
            "JSON.stringify({title: document.title, images: Array.from(document.images).map("
            "i => ({complete: i.complete, width: i.naturalWidth, height: i.naturalHeight, "
            "alt: i.alt}))})"
        )
        found = pipe.send("Runtime.evaluate", session, expression=script, returnByValue=True)
        facts = json.loads(found["result"]["value"])
        size = pipe.send("Page.getLayoutMetrics", session)["cssContentSize"]
        shot = pipe.send(
            "Page.captureScreenshot",
            session,
            format="png",
            captureBeyondViewport=True,
            clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
        )
        errors = []
        for event in pipe.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                errors.append(params["exceptionDetails"].get("text", "exception"))
            elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                errors.append(" ".join(str(a.get("value")) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                errors.append(params["entry"].get("text", ""))
        return PageLoad(errors, facts["images"], facts["title"], base64.b64decode(shot["data"]))
    finally:
        pipe.close()
