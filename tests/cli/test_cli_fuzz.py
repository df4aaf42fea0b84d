"""A small fuzz of the CLI (issue 29): every subcommand's numeric flags with bad numbers (nan,
inf, -1, 1e23, a 23-digit integer), every choice flag with a bogus choice, and every file flag
with a binary file and JSON nested 100,000 deep: always ``error: …`` on stderr, exit 2, no
traceback. The flags are read from the parser, so a new flag is fuzzed without editing this
file. Runs in-process (the server-starting commands are stopped before they could listen)."""

from __future__ import annotations

import argparse
from pathlib import Path

import optuna
import pytest

from plena_opt.cli.main import build_parser, main

SMALL = ["--model", "llama-3.1-8b", "--noc", "illustrative_gpu_node_8"]
# Arguments that make each command valid but for the fuzzed flag ({tmp}: the test's folder).
BASE = {
    "search": [*SMALL, "--storage", ":memory:", "--trials", "2", "--recheck", "0", "--quiet"],
    "estimate": [*SMALL, "--tp", "8"],
    "simulate": [*SMALL, "--tp", "8", "--samples", "4"],
    "collective": ["--op", "all-reduce", "--dim", "tp", "--tp", "8"],
    "memory describe": ["fictional-stacked-dram"],
    "worker": ["--storage", "sqlite:///{tmp}/w.db", "--study", "s"],
    "storage-proxy": ["--storage", "sqlite:///{tmp}/w.db"],
    "dashboard": ["--storage", "{tmp}/studies.log"],
    "serve": ["--storage", "{tmp}/studies.log"],
    "ui": ["--storage", "{tmp}/studies.log"],
    "export": ["tp8-ep1-dp1-pp1-cp1-replace-none-b16"],
}
INT_VALUES = ["nan", "inf", "-1", "1e23", "99999999999999999999999"]
FLOAT_VALUES = ["nan", "inf", "-inf", "1e400", "-1", "1e23"]
# Flags that name a JSON file (or a file among other things); the binary / deep file replaces it.
FILE_FLAGS = [
    ("estimate", "--memory"),
    ("estimate", "--chip"),
    ("estimate", "--noc"),
    ("estimate", "--model-path"),
    ("simulate", "--chip"),
    ("search", "--design-space"),
    ("search", "--memory"),
    ("memory describe", None),  # the positional PROFILE
    ("describe-noc", None),
    ("models show", "--model-path"),
    ("studies", "--storage"),
]


def _commands(parser: argparse.ArgumentParser, prefix: str = ""):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield prefix + name, sub
                yield from _commands(sub, f"{prefix}{name} ")


def _cases() -> tuple[list, list]:
    numbers, choices = [], []
    for name, sub in _commands(build_parser(None)):
        for a in sub._actions:
            if not a.option_strings or a.nargs == 0:
                continue
            flag = a.option_strings[-1]
            if a.choices:
                choices.append((name, flag))
            elif a.type in (int, float):
                for value in INT_VALUES if a.type is int else FLOAT_VALUES:
                    numbers.append((name, flag, value))
    return numbers, choices


NUMBERS, CHOICES = _cases()


@pytest.fixture
def no_listening(monkeypatch, tmp_path) -> Path:
    """Stop every command that would start serving; a journal store in ``tmp_path``."""
    import uvicorn
    from plena_server import app

    from plena_opt.cli import studies_cmd
    from plena_opt.search.storage import grpc_proxy
    from plena_opt.search.storage import storage as st

    def started(*a, **k):
        raise AssertionError("a bad value reached the server start")

    monkeypatch.setattr(app, "serve", started)
    monkeypatch.setattr(uvicorn.Server, "run", started)
    monkeypatch.setattr(studies_cmd, "run_dashboard", started)
    monkeypatch.setattr(grpc_proxy, "serve_proxy", started)
    optuna.create_study(study_name="s", storage=st.open_storage(str(tmp_path / "studies.log")))
    return tmp_path


def _refused(capsys, argv: list[str]) -> str:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, (argv, code, err[-300:])
    assert err.startswith("error: ") and "Traceback" not in err, (argv, err[-300:])
    return err


def _argv(name: str, tmp: Path, *extra: str) -> list[str]:
    base = [a.replace("{tmp}", str(tmp)) for a in BASE.get(name, [])]
    return [*name.split(), *base, *extra]


def test_every_numeric_flag_refuses_bad_numbers(capsys, no_listening) -> None:
    assert len(NUMBERS) > 150  # the walk found the flags
    for name, flag, value in NUMBERS:
        _refused(capsys, _argv(name, no_listening, flag, value))


def test_every_choice_flag_refuses_a_bogus_choice(capsys, no_listening) -> None:
    assert len(CHOICES) > 12
    for name, flag in CHOICES:
        err = _refused(capsys, _argv(name, no_listening, flag, "bogus-choice"))
        assert "invalid choice: 'bogus-choice'" in err


@pytest.mark.parametrize("kind", ["binary", "deep"])
def test_every_file_flag_refuses_binary_and_deep_files(capsys, no_listening, kind) -> None:
    path = no_listening / f"{kind}.json"
    if kind == "binary":
        path.write_bytes(bytes(range(128, 256)) * 8)
    else:
        path.write_text("[" * 100_000 + "]" * 100_000)
    for name, flag in FILE_FLAGS:
        argv = _argv(name, no_listening, *([flag] if flag else []), str(path))
        if name == "studies":
            argv = ["studies", "--storage", str(path)]
        _refused(capsys, argv)
