"""Headless Chromium for the page tests: one-shot commands (``--dump-dom``,
``--screenshot``) and a small DevTools-protocol session for real key presses
and clicks.

The session talks over ``--remote-debugging-pipe`` (JSON messages ending in a
NUL byte, read by Chromium on fd 3 and written on fd 4), so it needs no
websocket client and opens no port.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from aeval.report.headless_chromium import find_chromium, headless_command

CHROMIUM = find_chromium()
SKIP_REASON = (
    "headless Chromium is not installed (apt-get install chromium): "
    "the viewer's browser tests need a real browser"
)
WINDOW = (1400, 900)


def flags(profile: Path) -> list[str]:
    assert CHROMIUM is not None
    return headless_command(CHROMIUM, profile, WINDOW)


def run_chromium(profile: Path, *args: str) -> str:
    """Run one headless Chromium command; its stdout."""
    done = subprocess.run(
        [*flags(profile), *args], capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout


def _above_9(fd: int) -> int:
    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return high


class DevTools:
    """One page in a headless Chromium, driven through the DevTools protocol."""

    def __init__(self, profile: Path) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # The child's ends move above fd 9 first, so that placing them on 3 and 4
        # cannot overwrite one with the other (bash, not sh: dash only takes 0-9).
        to_chrome_r, from_chrome_w = (_above_9(fd) for fd in (to_chrome_r, from_chrome_w))
        script = f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w}'
        self._process = subprocess.Popen(
            ["/bin/bash", "-c", script, *flags(profile), "--remote-debugging-pipe", "about:blank"],
            pass_fds=(to_chrome_r, from_chrome_w),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next_id = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self._events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._lock = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self._session = attached["sessionId"]
        self.call("Page.enable")

    def _read(self) -> None:
        buffer = b""
        with os.fdopen(self._from_chrome, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                buffer += chunk
                *messages, buffer = buffer.split(b"\0")
                for raw in messages:
                    message = json.loads(raw)
                    if "id" in message:
                        with self._lock:
                            self._replies[message["id"]] = message
                            self._lock.notify_all()
                    else:
                        self._events.put(message)

    def _call(
        self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None
    ) -> dict[str, Any]:
        call_id = self._send(method, params, session=session)
        with self._lock:
            if not self._lock.wait_for(lambda: call_id in self._replies, timeout=60):
                raise TimeoutError(f"no reply to {method}")
            reply = self._replies.pop(call_id)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def _send(
        self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None
    ) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        return self._next_id

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A command to the page."""
        return self._call(method, params, session=self._session)

    def open(self, url: str) -> None:
        """Navigate and wait for the load event."""
        while not self._events.empty():  # events of earlier pages
            self._events.get_nowait()
        self.call("Page.navigate", {"url": url})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            event = self._events.get(timeout=60)
            if event.get("method") == "Page.loadEventFired":
                return
        raise TimeoutError(f"{url} did not load")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20) -> Any:
        """Poll until the expression is truthy; its value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.05)
        raise TimeoutError(f"still false after {timeout} s: {expression}")

    def press(self, key: str, code: str, key_code: int, text: str = "") -> None:
        """A real key press, as the keyboard would send it."""
        down = {"type": "keyDown", "key": key, "code": code, "windowsVirtualKeyCode": key_code}
        if text:
            down["text"] = text
        self.call("Input.dispatchKeyEvent", down)
        self.call("Input.dispatchKeyEvent", {**down, "type": "keyUp", "text": ""})

    def type_text(self, text: str) -> None:
        self.call("Input.insertText", {"text": text})

    def click(self, selector: str) -> None:
        """A real mouse click in the middle of the first element matching ``selector``."""
        box = self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
            ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1},
            )

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._send("Browser.close")  # Chromium exits, maybe before it replies
        try:
            self._process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._to_chrome)
        self._reader.join(timeout=5)
