"""A headless Chromium driven over the DevTools protocol through a pipe (no websocket, no
extra package): open a page, wait for something, read the DOM (shadow roots included),
type, take a screenshot. Used by tests/docs/test_site.py."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def chromium_path() -> str | None:
    """The Chromium binary (Debian's package `chromium`), or None."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One headless Chromium with one tab; every call waits for its answer."""

    def __init__(self, binary: str, width: int = 1280, height: int = 900) -> None:
        self._profile = tempfile.mkdtemp(prefix="hpc_docs_chromium.")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # Chromium reads commands from fd 3 and writes answers to fd 4: bash puts the pipes
        # there (dash takes no fd above 9).
        self._proc = subprocess.Popen(
            [
                "bash",
                "-c",
                f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w}',
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-dev-shm-usage",
                "--remote-debugging-pipe",
                f"--user-data-dir={self._profile}",
                f"--window-size={width},{height}",
                "--hide-scrollbars",
                "about:blank",
            ],
            pass_fds=(to_chrome_r, from_chrome_w),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Network", "Runtime", "DOM"):
            self.call(f"{domain}.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    # --- the protocol
    def _send(self, message: dict[str, Any]) -> None:
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")

    def _receive(self, timeout: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_chrome], [], [], timeout)
            if not ready:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def _call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = 90.0,
    ) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._send(message)
        while True:
            answer = self._receive(timeout)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            if "method" in answer:
                self.events.append(answer)

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A command to the tab."""
        return self._call(method, params, self._session)

    # --- what a test does
    def open(self, url: str) -> None:
        """Navigate and wait for the load event."""
        self.events.clear()
        self.call("Page.navigate", {"url": url})
        self.wait_for(lambda: self.js("document.readyState") == "complete", f"{url} to load")

    def js(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, check: Callable[[], Any], what: str, timeout: float = 90.0) -> Any:
        """Poll check() until it returns something true; fail naming what was awaited. The
        limit is generous: a loaded 2-core machine can take tens of seconds to draw a page."""
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout:.0f} s for {what}")
            time.sleep(0.2)

    def dom(self) -> dict[str, Any]:
        """The whole DOM tree, shadow roots (closed ones too) and frames included."""
        return self.call("DOM.getDocument", {"depth": -1, "pierce": True})["root"]

    def type(self, text: str) -> None:
        """Type text into the focused element."""
        self.call("Input.insertText", {"text": text})

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        """A PNG of the page (the whole length unless full_page is False)."""
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full_page}
        if full_page:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {
                "x": 0,
                "y": 0,
                "width": size["width"],
                "height": min(size["height"], 6000),
                "scale": 1,
            }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", params)["data"]))
        return path

    def requested_urls(self) -> list[str]:
        """Every URL the page asked for since the last open()."""
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e.get("method") == "Network.requestWillBeSent"
        ]

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing anyway
            self._call("Browser.close", timeout=5)
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)
        shutil.rmtree(self._profile, ignore_errors=True)


def nodes(tree: dict[str, Any]):
    """Every node of a DOM.getDocument tree, shadow roots and frames included."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.get("children", []))
        stack.extend(node.get("shadowRoots", []))
        if "contentDocument" in node:
            stack.append(node["contentDocument"])


def text_of(node: dict[str, Any]) -> str:
    """The text under a node (its text nodes joined)."""
    return " ".join(n.get("nodeValue", "").strip() for n in nodes(node) if n.get("nodeType") == 3).strip()
