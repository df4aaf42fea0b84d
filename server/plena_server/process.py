"""Run the server as a child process on loopback (tests, benchmarks).

It runs ``python -m plena_server``: the same code as ``plena-opt serve``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


class ServerProcess:
    """A ``plena-opt serve --host 127.0.0.1 --port 0`` child; ``target`` is ``127.0.0.1:PORT``."""

    def __init__(self, storage: str | Path, *args: str, cwd: str | Path | None = None) -> None:
        self.storage = str(storage)
        self.args = list(args)
        self.cwd = str(cwd) if cwd else None
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> ServerProcess:
        """Start the server and wait for its ``serving on`` line (raises on failure)."""
        cmd = [sys.executable, "-m", "plena_server", "--host", "127.0.0.1"]
        cmd += ["--port", "0", "--storage", self.storage, *self.args]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.cwd, env=env
        )
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # blocks until the server prints or exits
        if "serving on" not in line or time.monotonic() > deadline:
            self.proc.kill()
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"server did not start: {line!r} {err[-2000:]}")
        self.port = int(line.strip().rsplit(":", 1)[1])
        return self

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL (kill -9) and reap."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stderr_text(self) -> str:
        if self.proc is None or self.proc.stderr is None or self.proc.poll() is None:
            return ""
        return self.proc.stderr.read()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()
