"""``search --workers N`` when a worker process is killed (issue 29): the surviving workers
finish the study (a dead worker's chunk goes stale and is retried), so the command names the
dead worker on stderr, prints the front and exits 0; when every worker died the study is
incomplete: ``error: …`` (exit 1, no traceback) says what is missing and how to resume."""

from __future__ import annotations

import functools
import json
import multiprocessing
import os
import signal
import threading
import time

import pytest

from plena_opt import api
from plena_opt.api import workers as workers_api
from plena_opt.cli.main import main

SMALL = ["--model", "llama-3.1-8b", "--noc", "illustrative_gpu_node_8", "--batch-size", "4"]


def _kill_workers(how_many: int, stop: threading.Event, killed: list[int]) -> None:
    """SIGKILL the first ``how_many`` local worker processes as soon as they run."""
    while not stop.is_set() and len(killed) < how_many:
        for p in multiprocessing.active_children():
            if p.pid and p.pid not in killed and len(killed) < how_many:
                os.kill(p.pid, signal.SIGKILL)
                killed.append(p.pid)
        time.sleep(0.01)


def _search(tmp_path, monkeypatch, capsys, kill: int) -> tuple[int, str, str, list[int]]:
    # 1 s heartbeats: a dead worker's chunk is stale after 3 s instead of 15 s
    local = functools.partial(workers_api.run_local_workers, heartbeat_s=1.0, throttle_s=0.02)
    monkeypatch.setattr(api, "run_local_workers", local)
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_workers, args=(kill, stop, killed), daemon=True)
    killer.start()
    url = f"sqlite:///{tmp_path / 'w.db'}"
    argv = ["search", *SMALL, "--storage", url, "--workers", "2", "--recheck", "0", "--json"]
    try:
        code = main([*argv, "--quiet", "--study", "death"])
    finally:
        stop.set()
        killer.join()
    out = capsys.readouterr()
    return code, out.out, out.err, killed


def test_a_killed_worker_is_reported_and_the_front_printed(tmp_path, monkeypatch, capsys) -> None:
    code, out, err, killed = _search(tmp_path, monkeypatch, capsys, kill=1)
    assert len(killed) == 1
    assert code == 0, err
    assert "Traceback" not in err and "RuntimeError" not in err
    assert "of 2 killed by SIGKILL (exit code -9)" in err and "finished the study" in err
    doc = json.loads(out)
    assert doc["front"] and doc["legal_points"] == doc["trials_completed"]


def test_every_worker_killed_is_an_incomplete_study_error(tmp_path, monkeypatch, capsys) -> None:
    code, _, err, killed = _search(tmp_path, monkeypatch, capsys, kill=2)
    assert len(killed) == 2
    assert code == 1
    assert err.startswith("error: study 'death' is incomplete: 0 of ") and "Traceback" not in err
    assert "killed by SIGKILL" in err and "plena-opt worker --storage sqlite:///" in err


@pytest.mark.parametrize(("code", "text"), [(-9, "killed by SIGKILL"), (3, "status 3")])
def test_how_a_worker_died_is_said(code, text) -> None:
    assert text in workers_api.died(code)
