"""Real servers for the tests and the benchmarks: ``sdc-service`` in a subprocess on a free
loopback port (:func:`server`), or an app behind uvicorn with the service's own options in
a thread of this process (:func:`served`)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from service.__main__ import server_options
from service.config import Settings

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, proc: subprocess.Popen, seconds: float = 30) -> None:
    """Return once ``url/healthz`` answers; raise if the process dies or time runs out."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(url + "/healthz", timeout=1).read()
            return
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("service did not start") from None
            time.sleep(0.1)


@dataclass(frozen=True)
class Server:
    """A running ``sdc-service``: its base URL and main process id."""

    url: str
    pid: int

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def cpu_seconds(self) -> float:
        """User + system CPU time used so far by the server and its worker processes
        (Linux ``/proc``), to report the server's CPU cost per request."""
        ticks = os.sysconf("SC_CLK_TCK")
        total, pending = 0.0, [self.pid]
        while pending:
            pid = pending.pop()
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
                for task in Path(f"/proc/{pid}/task").iterdir():
                    pending += [int(c) for c in (task / "children").read_text().split()]
        return total


@contextlib.contextmanager
def server(env: dict | None = None, workers: int = 1, root: Path = ROOT):
    """Start ``sdc-service`` on a free loopback port; yield it as a :class:`Server`; stop
    it. ``root`` is the checkout to run (an earlier version, for benchmarks that compare
    back to back), with this interpreter and its packages."""
    port = free_port()
    full_env = {
        **os.environ,
        "SDC_HOST": "127.0.0.1",
        "SDC_PORT": str(port),
        "SDC_WORKERS": str(workers),
        "SDC_LOG_LEVEL": "warning",
        **(env or {}),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "service"], cwd=root, env=full_env, stdout=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_up(url, proc)
        yield Server(url, proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextlib.contextmanager
def served(app, settings: Settings):
    """``app`` behind uvicorn with the service's options (:func:`server_options`) on a free
    loopback port, in a thread; yields the uvicorn ``Server`` and the port, then stops it
    (as SIGTERM would: ``should_exit``)."""
    options = {**server_options(settings), "host": "127.0.0.1", "port": free_port(), "workers": 1}
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, **options))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.01)
    try:
        yield server, options["port"]
    finally:
        server.should_exit = True
        thread.join(30)
        assert not thread.is_alive(), "server did not stop"
