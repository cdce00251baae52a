"""Headless Chromium for tests, driven over the DevTools protocol (CDP) with the project's own aiohttp.

A page is loaded with networking off: every request but to the page's own file is refused twice over,
by the browser's network emulation (``Network.emulateNetworkConditions(offline)``) and by a proxy that
is a closed port. What the page says and asks for is recorded: console errors, uncaught exceptions,
the browser's own error log (a refused request lands there), and every URL it requested.

    binary = chromium()                    # None where none is installed (skip the test with the reason)
    async with Browser(binary, tmp_path) as b:
        page = await b.open(f"file://{path}")
        drawn = await page.wait_for("document.querySelectorAll('.js-plotly-plot').length", 30, "charts")
        await page.screenshot(tmp_path / "page.png")
    page.errors, page.requests

No other package: the protocol is JSON over one websocket (aiohttp's client), the browser Debian's.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

BINARIES = ("chromium", "chromium-browser", "google-chrome", "chrome")
FLAGS = [
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
    # networking off: every request goes to a proxy that is a closed port (loopback too)
    "--proxy-server=127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
]
MISSING = "no Chromium installed (apt-get install chromium; .ci/run installs it)"


def chromium() -> str | None:
    """The Chromium binary on PATH, or None."""
    return next((path for name in BINARIES if (path := shutil.which(name))), None)


class CDPError(AssertionError):
    pass


class Page:
    """One tab, attached over the browser's websocket (flat sessions)."""

    def __init__(self, browser: Browser, session: str):
        self.browser, self.session = browser, session
        self.errors: list[str] = []  # console.error, uncaught exceptions, the browser's error log
        self.requests: list[str] = []  # every URL the page asked for
        self.urls: dict[str, str] = {}  # by request id
        self.loaded = asyncio.Event()

    async def send(self, method: str, **params: Any) -> dict:
        return await self.browser.send(method, params, session=self.session)

    def event(self, method: str, params: dict) -> None:
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append(
                "console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            )
        elif method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            self.errors.append("exception: " + str(d.get("exception", {}).get("description") or d.get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            e = params["entry"]
            self.errors.append(f"log: {e.get('text')} {e.get('url', '')}".strip())
        elif method == "Network.requestWillBeSent":
            self.urls[params.get("requestId", "")] = url = params.get("request", {}).get("url", "")
            self.requests.append(url)
        elif method == "Network.loadingFailed":
            self.errors.append(
                f"request failed: {self.urls.get(params.get('requestId', ''), '?')} ({params.get('errorText')})"
            )
        elif method == "Page.loadEventFired":
            self.loaded.set()

    async def evaluate(self, expression: str) -> Any:
        r = await self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise CDPError(f"{expression!r} threw: {r['exceptionDetails'].get('exception', {}).get('description')}")
        return r["result"].get("value")

    async def wait_for(self, expression: str, timeout: float, what: str) -> Any:
        """Evaluate ``expression`` until it is truthy and return its value; CDPError naming ``what``
        past ``timeout`` seconds, or as soon as the page reported an error (it will not get there)."""
        deadline = time.monotonic() + timeout
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            if self.errors:
                raise CDPError(f"{what}: not yet, and the page reported errors: {self.errors}")
            if time.monotonic() >= deadline:
                raise CDPError(f"not within {timeout:g} s: {what}")
            await asyncio.sleep(0.05)

    async def mouse(self, kind: str, x: float, y: float) -> None:
        """A real mouse event at page coordinates (the viewport's): mouseMoved, mousePressed, mouseReleased."""
        extra = {"button": "left", "clickCount": 1} if kind != "mouseMoved" else {}
        await self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, **extra)

    async def screenshot(self, path: Path, *, full_page: bool = True, clip: dict | None = None) -> Path:
        """A PNG of the page (all of it, or ``clip``: x, y, width, height in CSS pixels)."""
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full_page or clip is not None}
        if clip is not None:
            params["clip"] = {**clip, "scale": 1}
        r = await self.send("Page.captureScreenshot", **params)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(r["data"]))
        return path


class Browser:
    """Chromium started with a fresh profile in ``workdir`` and the flags above; ended on exit."""

    def __init__(self, binary: str, workdir: Path, *, width: int = 1400, height: int = 1000, timeout: float = 60):
        self.binary, self.workdir, self.timeout = binary, Path(workdir), timeout
        self.width, self.height = width, height
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future] = {}
        self.pages: dict[str, Page] = {}

    async def __aenter__(self) -> Browser:
        self.workdir.mkdir(parents=True, exist_ok=True)
        profile = Path(tempfile.mkdtemp(prefix="chromium-profile-", dir=self.workdir))  # a new, empty profile
        self.log = open(self.workdir / "chromium.log", "wb")
        self.proc = subprocess.Popen(
            [
                self.binary,
                *FLAGS,
                f"--user-data-dir={profile}",
                "--remote-debugging-port=0",
                f"--window-size={self.width},{self.height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        active = profile / "DevToolsActivePort"  # the port it chose, and the browser's websocket path
        deadline = time.monotonic() + self.timeout
        while not (active.exists() and len(active.read_text().split()) == 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.log.flush()
                tail = (self.workdir / "chromium.log").read_text(errors="replace")[-2000:]
                raise CDPError(f"Chromium did not start (exit {self.proc.poll()}): {tail}")
            await asyncio.sleep(0.05)
        port, path = active.read_text().split()
        self.http = aiohttp.ClientSession()
        self.ws = await self.http.ws_connect(f"ws://127.0.0.1:{port}{path}", max_msg_size=0)
        self.reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.reader.cancel()
        await self.ws.close()
        await self.http.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data:
                future = self.pending.pop(data["id"], None)
                if future and not future.done():
                    future.set_result(data)
            elif (page := self.pages.get(data.get("sessionId", ""))) is not None:
                page.event(data["method"], data.get("params", {}))
        for future in self.pending.values():  # the browser went away
            if not future.done():
                future.set_exception(CDPError("the browser closed its DevTools connection"))

    async def send(self, method: str, params: dict | None = None, *, session: str | None = None) -> dict:
        i = next(self.ids)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.pending[i] = future
        await self.ws.send_str(
            json.dumps(
                {"id": i, "method": method, "params": params or {}, **({"sessionId": session} if session else {})}
            )
        )
        reply = await asyncio.wait_for(future, self.timeout)
        if "error" in reply:
            raise CDPError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def open(self, url: str) -> Page:
        """A new tab, networking off, that loads ``url``; returns once its load event fired."""
        target = (await self.send("Target.createTarget", {"url": "about:blank"}))["targetId"]
        session = (await self.send("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
        page = self.pages[session] = Page(self, session)
        for domain in ("Page", "Runtime", "Log", "Network"):
            await page.send(f"{domain}.enable")
        await page.send(
            "Network.emulateNetworkConditions", offline=True, latency=0, downloadThroughput=-1, uploadThroughput=-1
        )
        await page.send(
            "Emulation.setDeviceMetricsOverride",
            width=self.width,
            height=self.height,
            deviceScaleFactor=1,
            mobile=False,
        )
        await page.send("Page.navigate", url=url)
        await asyncio.wait_for(page.loaded.wait(), self.timeout)
        return page
