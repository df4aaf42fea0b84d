"""The default journal store never loses or corrupts what a user stored.

Real files under tmp_path: a path that is not a journal is refused untouched, a record torn by a
crash is cut off under the journal lock (on open and before every append, so the per-process
storage cache cannot hide it), and the repaired journal reads back in a fresh process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import optuna
import pytest
from optuna.storages.journal import JournalFileSymlinkLock

from plena_opt.errors import PlenaInputError
from plena_opt.search.storage import storage as st

optuna.logging.set_verbosity(optuna.logging.WARNING)

# A fresh interpreter loads study "s" through open_storage and prints its COMPLETE trial count.
COUNT = """
import sys, optuna
from plena_opt.search.storage.storage import open_storage
optuna.logging.set_verbosity(optuna.logging.WARNING)
s = optuna.load_study(study_name="s", storage=open_storage(sys.argv[1]))
print(sum(t.state == optuna.trial.TrialState.COMPLETE for t in s.trials))
"""


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    """Each test starts as a new process would: no store opened yet."""
    monkeypatch.setattr(st, "_OPEN", {})


def _complete_in_fresh_process(path: Path) -> int:
    out = subprocess.run(
        [sys.executable, "-c", COUNT, str(path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


def _write_study(path: Path, n: int) -> list[optuna.trial.FrozenTrial]:
    study = optuna.create_study(
        study_name="s", storage=st.open_storage(str(path)), sampler=optuna.samplers.RandomSampler(0)
    )
    study.optimize(lambda t: t.suggest_float("x", 0.0, 1.0), n_trials=n)
    return study.trials


def _complete(trials: list[optuna.trial.FrozenTrial]) -> list[tuple[dict, float]]:
    return [(t.params, t.value) for t in trials if t.state == optuna.trial.TrialState.COMPLETE]


def _all_lines_are_records(path: Path) -> bool:
    data = path.read_bytes()
    return data.endswith(b"\n") and all(
        isinstance(json.loads(line).get("op_code"), int) for line in data.splitlines()
    )


@pytest.mark.parametrize(
    "content",
    [
        b"garbage",
        b"garbage\n",
        b"myhost.example.org\n",  # what /etc/hostname holds
        b"# notes\nsome text\nno json here\n",
        b'{"name": "a json object without op_code"}\n',
        b"[1, 2, 3]\n",
        b"\n",
        b"{",  # not even a plausible torn first record
    ],
)
def test_non_journal_file_is_refused_untouched(tmp_path, content) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(PlenaInputError, match="is not an Optuna journal file") as err:
        st.open_storage(str(path))
    assert err.value.field == "storage"
    assert str(path) in str(err.value)
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # no lock file left
    assert str(path.resolve()) not in st._OPEN


def test_real_text_file_is_refused_untouched(tmp_path) -> None:
    src = Path("/etc/hostname")
    content = src.read_bytes() if src.is_file() and src.stat().st_size else b"localhost\n"
    path = tmp_path / "hostname"
    path.write_bytes(content)
    with pytest.raises(PlenaInputError, match="not an Optuna journal"):
        st.open_storage(str(path))
    assert path.read_bytes() == content


def test_search_cli_refuses_garbage_store(tmp_path, monkeypatch, capsys) -> None:
    from plena_opt.cli.main import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "g.log").write_bytes(b"garbage")
    assert main(["search", "--storage", "g.log", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --storage") and "not an Optuna journal" in err
    assert "Traceback" not in err
    assert (tmp_path / "g.log").read_bytes() == b"garbage"


def test_journal_with_a_bad_last_line_is_refused(tmp_path) -> None:
    # Optuna itself silently skips a bad last line, then appends after it and breaks the file.
    path = tmp_path / "s.log"
    _write_study(path, 2)
    st._OPEN.clear()
    good = path.read_bytes()
    path.write_bytes(good + b"not a record\n")
    with pytest.raises(PlenaInputError, match="line .* is not a journal record"):
        st.open_storage(str(path))
    assert path.read_bytes() == good + b"not a record\n"


@pytest.mark.parametrize("exists", [False, True])
def test_missing_or_empty_file_becomes_a_new_journal(tmp_path, exists) -> None:
    path = tmp_path / "new.log"
    if exists:
        path.write_bytes(b"")
    assert len(_complete(_write_study(path, 2))) == 2
    assert _all_lines_are_records(path)


def test_torn_last_record_is_repaired_on_open(tmp_path, caplog) -> None:
    path = tmp_path / "s.log"
    before = _complete(_write_study(path, 4))
    whole = path.read_bytes()
    path.write_bytes(whole[:-7])  # a crash mid-append: the last record lost its end
    keep = whole[:-7].rfind(b"\n") + 1
    st._OPEN.clear()  # a new process opens it

    with caplog.at_level("WARNING", logger=st.__name__):
        storage = st.open_storage(str(path))
    assert path.read_bytes() == whole[:keep]  # only the torn record went
    assert "dropped an incomplete last record" in caplog.text
    assert f"{len(whole) - 7 - keep} bytes" in caplog.text
    study = optuna.load_study(study_name="s", storage=storage)
    after = _complete(study.trials)
    assert after == before[: len(after)] and len(after) >= len(before) - 1

    study.optimize(lambda t: t.suggest_float("x", 0.0, 1.0), n_trials=2)
    assert _all_lines_are_records(path)
    assert _complete_in_fresh_process(path) == len(after) + 2


def test_cached_storage_repairs_a_tail_torn_by_another_process(tmp_path) -> None:
    path = tmp_path / "s.log"
    _write_study(path, 2)  # this process now holds the store in its cache
    cached = st.open_storage(str(path))
    # Another process is killed mid-append: its record stops half way, no newline.
    code = (
        "import sys; f = open(sys.argv[1], 'ab');"
        'f.write(b\'{"op_code":6,"worker_id":"dead-worker","trial_id":9,"sta\'); f.close()'
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=60)
    assert not path.read_bytes().endswith(b"\n")

    assert st.open_storage(str(path)) is cached  # the cache skips the open-time repair ...
    study = optuna.load_study(study_name="s", storage=cached)
    study.optimize(lambda t: t.suggest_float("x", 0.0, 1.0), n_trials=2)
    assert _all_lines_are_records(path)  # ... and the first append cut the torn tail anyway
    assert b"dead-worker" not in path.read_bytes()
    assert any("dropped an incomplete" in n for n in cached._backend.lock.notes)
    assert _complete_in_fresh_process(path) == 4


def test_repair_waits_for_a_writer_that_holds_the_lock(tmp_path) -> None:
    path = tmp_path / "s.log"
    _write_study(path, 1)
    st._OPEN.clear()
    record = b'{"op_code":0,"worker_id":"w","study_name":"t","directions":[1]}\n'
    lock = JournalFileSymlinkLock(str(path), grace_period=st.LOCK_GRACE_SECONDS)
    lock.acquire()  # a live writer is mid-append: half its record is on disk
    with open(path, "ab") as f:
        f.write(record[:20])
    opened: list = []
    opener = threading.Thread(target=lambda: opened.append(st.open_storage(str(path))))
    opener.start()
    time.sleep(0.5)
    assert opener.is_alive() and not opened  # the repair is waiting for the lock
    with open(path, "ab") as f:
        f.write(record[20:])
    lock.release()
    opener.join(timeout=30)
    assert opened and path.read_bytes().endswith(record)  # the finished record was kept
    assert sorted(optuna.get_all_study_names(opened[0])) == ["s", "t"]


def test_listing_a_missing_sqlite_store_creates_nothing(tmp_path, capsys) -> None:
    from plena_opt.cli.main import main

    db = tmp_path / "nope.db"
    url = f"sqlite:///{db}"
    assert not st.storage_exists(url)
    assert main(["studies", "--storage", url]) == 0
    assert "no studies" in capsys.readouterr().out
    assert not db.exists()
    st.open_storage(url)  # a search creates it
    assert db.is_file() and st.storage_exists(url)
    assert st.storage_exists("sqlite://") and st.storage_exists("sqlite:///:memory:")
    assert st.storage_exists("postgresql://user@host/db")  # opened to list
    assert not st.storage_exists(str(tmp_path / "missing.log"))
