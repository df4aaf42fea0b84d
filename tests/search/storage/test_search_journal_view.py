"""A reader in ``committed_view`` never reports records a batch has not written yet."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import optuna

from plena_opt.search.storage.storage import batch_writes, committed_view, open_storage


def _file_trials(path: Path) -> int:
    return sum(1 for line in path.read_bytes().splitlines() if b'"op_code":4' in line)


def test_reader_waits_for_the_batch_in_progress_to_reach_the_file(tmp_path: Path) -> None:
    path = tmp_path / "j.log"
    storage = open_storage(str(path))
    study = optuna.create_study(study_name="s", storage=storage)
    inside, release = threading.Event(), threading.Event()

    def writer() -> None:
        with batch_writes(storage):
            study.add_trial(optuna.trial.create_trial(value=1.0))
            inside.set()
            release.wait(10)

    t = threading.Thread(target=writer)
    t.start()
    assert inside.wait(10)
    seen: dict[str, int] = {}

    def reader() -> None:
        with committed_view(storage):
            seen["trials"] = len(study.get_trials(deepcopy=False))
            seen["on_disk"] = _file_trials(path)

    r = threading.Thread(target=reader)
    r.start()
    time.sleep(0.3)
    assert "trials" not in seen  # still waiting: the trial is only in the batch's buffer
    release.set()
    t.join(10)
    r.join(10)
    assert seen["trials"] == 1 and seen["on_disk"] == 1  # what it reports is on disk


def test_batch_waits_for_a_reader_then_writes(tmp_path: Path) -> None:
    path = tmp_path / "j.log"
    storage = open_storage(str(path))
    study = optuna.create_study(study_name="s", storage=storage)
    done = threading.Event()

    def writer() -> None:
        with batch_writes(storage):
            study.add_trial(optuna.trial.create_trial(value=2.0))
        done.set()

    with committed_view(storage):
        t = threading.Thread(target=writer)
        t.start()
        time.sleep(0.3)
        assert not done.is_set() and _file_trials(path) == 0
    t.join(10)
    assert done.is_set() and _file_trials(path) == 1
