"""What a user expects of the ``plena-opt`` CLI (issue #10): --version, did-you-mean, defaults in
--help, one NoC rule, busy ports, environment defaults, model directories, closed pipes."""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys

import pytest

from plena_opt import __version__
from plena_opt.cli.common import dp_fill_hint
from plena_opt.cli.conventions import EXIT_BROKEN_PIPE, server_target, suggest_in_message
from plena_opt.cli.main import build_parser, main
from plena_opt.estimate.plan import DEFAULT_NOC


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse errors and --version
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def _subparsers(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                for inner, deeper in _subparsers(sub):
                    yield f"{name} {inner}", deeper


def test_version(capsys) -> None:
    code, out, _ = run(capsys, "--version")
    assert code == 0
    assert out.strip() == f"plena-opt {__version__}"


@pytest.mark.parametrize(
    ("argv", "suggestion"),
    [
        (["serch"], "'search'"),
        (["estimate", "--tpp", "2"], "'--tp'"),
        (["search", "--sampler", "tp"], "'tpe'"),
        (["estimate", "--model", "llama-3.1-8"], "'llama-3.1-8b'"),
        (["estimate", "--noc", "illustrative_gpu_clster_32"], "'illustrative_gpu_cluster_32'"),
        (["estimate", "--memory", "fictional-stacked-dra"], "'fictional-stacked-dram'"),
        (["estimate", "--chip", "plena-defalt"], "'plena-default'"),
    ],
)
def test_unknown_names_get_a_did_you_mean(capsys, argv, suggestion) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("error: ")
    assert f"did you mean {suggestion}?" in err
    assert "Traceback" not in err


def test_a_flag_another_command_takes_gets_no_far_fetched_suggestion(capsys) -> None:
    """`search --tp 2` once suggested '--plot' (difflib's default cutoff 0.6)."""
    code, _, err = run(capsys, "search", "--model", "llama-3.1-8b", "--tp", "2")
    assert code == 2
    assert "unrecognized arguments: --tp 2" in err
    assert "did you mean" not in err


def test_no_suggestion_when_nothing_is_close() -> None:
    assert suggest_in_message("unknown model 'zzzzzz'; choose one of: a", lambda k: ["a"]) == (
        "unknown model 'zzzzzz'; choose one of: a"
    )


def test_every_flag_has_help_and_states_its_default() -> None:
    parser = build_parser(None)
    assert "console command" not in parser.format_help()  # a description, not the docstring
    missing = []
    for name, sub in _subparsers(parser):
        if not sub.description:
            missing.append(f"{name}: no description")
        fmt = sub._get_formatter()
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            text = fmt._expand_help(action) if action.help else ""
            if not text:
                missing.append(f"{name} {action.option_strings or action.dest}: no help")
            elif (
                action.option_strings
                and action.nargs != 0
                and not action.required
                and "default" not in text
            ):
                missing.append(f"{name} {action.option_strings}: no default in {text!r}")
    assert missing == []


@pytest.mark.parametrize(
    ("command", "flag", "default"),
    [
        ("search", "--noc", DEFAULT_NOC),
        ("simulate", "--noc", DEFAULT_NOC),
        ("estimate", "--noc", DEFAULT_NOC),
        ("search", "--batch-size", "16"),
        ("serve", "--port", "50051"),
        ("dashboard", "--port", "8080"),
        ("dashboard", "--host", "127.0.0.1"),
    ],
)
def test_help_shows_the_default(capsys, command, flag, default) -> None:
    code, out, _ = run(capsys, command, "--help")
    assert code == 0
    text = " ".join(out.split())  # argparse wraps lines
    start = text.index(f"{flag} {flag.lstrip('-').replace('-', '_').upper()} ")
    assert f"default: {default}" in text[start : start + 400]


def test_estimate_and_simulate_use_the_same_default_noc(capsys) -> None:
    """One rule: a multi-device plan without --noc runs on DEFAULT_NOC in every command."""
    argv = ["--model", "llama-3.1-8b", "--tp", "8", "--dp", "4", "--output-seq", "8", "--json"]
    code, implicit, err = run(capsys, "estimate", *argv)
    assert code == 0, err
    code, explicit, _ = run(capsys, "estimate", *argv, "--noc", DEFAULT_NOC)
    assert code == 0
    assert json.loads(implicit) == json.loads(explicit)
    assert json.loads(implicit)["noc"]["name"] == DEFAULT_NOC
    code, sim, err = run(capsys, "simulate", *argv, "--samples", "0", "--max-window-steps", "2")
    assert code == 0, err
    assert json.loads(sim)["analytic"]["tps"] == pytest.approx(json.loads(implicit)["tps"])


@pytest.mark.parametrize("command", ["estimate", "simulate"])
def test_a_plan_smaller_than_the_cluster_says_which_dp_fills_it(capsys, command) -> None:
    code, _, err = run(capsys, command, "--model", "llama-3.1-8b", "--tp", "4", "--dp", "2")
    assert code == 2
    assert f"the plan uses 8 devices but NoC profile '{DEFAULT_NOC}' has 32" in err
    assert "--dp 8 would fill it" in err


def test_dp_fill_hint_only_when_a_dp_fills_the_cluster() -> None:
    msg = "the plan uses {} devices but NoC profile 'x' has {}"
    assert dp_fill_hint(msg.format(4, 32), 1) == "; --dp 8 would fill it"
    assert dp_fill_hint(msg.format(6, 32), 2) == ""  # 3 does not divide 32
    assert dp_fill_hint(msg.format(64, 32), 1) == ""  # too many devices: no dp helps


def _busy_port() -> tuple[socket.socket, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock, sock.getsockname()[1]


def test_serve_on_a_busy_port_is_an_input_error(capsys) -> None:
    sock, port = _busy_port()
    with sock:
        code, out, err = run(capsys, "serve", "--port", str(port), "--storage", ":memory:")
    assert code == 2
    assert err.startswith(f"error: cannot serve on 127.0.0.1:{port}")
    assert "Traceback" not in err and "serving on" not in out


def test_dashboard_on_a_busy_port_errors_before_printing_its_url(tmp_path, capsys) -> None:
    pytest.importorskip("optuna_dashboard")
    import optuna

    from plena_opt.search.storage.storage import open_storage

    store = tmp_path / "s.log"
    optuna.create_study(storage=open_storage(str(store)), study_name="x")
    capsys.readouterr()  # drop Optuna's own "study created" log line (or a logging error)
    sock, port = _busy_port()
    with sock:
        code, out, err = run(capsys, "dashboard", "--storage", str(store), "--port", str(port))
    assert code == 2
    assert err.startswith(f"error: cannot serve the dashboard on 127.0.0.1:{port}")
    assert "http://" not in out


@pytest.mark.parametrize(
    ("given", "target"),
    [
        ("localhost", "localhost:50051"),
        ("10.0.0.2:7000", "10.0.0.2:7000"),
        ("::1", "[::1]:50051"),
        ("[::1]", "[::1]:50051"),
        ("[::1]:9", "[::1]:9"),
        ("unix:/tmp/s", "unix:/tmp/s"),
    ],
)
def test_server_without_a_port_uses_50051(given, target) -> None:
    assert server_target(given) == target


def test_environment_defaults_and_flags_win(monkeypatch) -> None:
    monkeypatch.setenv("PLENA_OPT_SERVER", "remote-host")
    monkeypatch.setenv("PLENA_OPT_STORAGE", "env.log")
    for argv in (["estimate"], ["search"], ["simulate"]):
        assert build_parser(argv).parse_args(argv).server == "remote-host:50051"
    argv = ["estimate", "--server", "other:1"]
    assert build_parser(argv).parse_args(argv).server == "other:1"
    for argv in (["search"], ["studies"], ["dashboard"], ["serve"]):
        assert build_parser(argv).parse_args(argv).storage == "env.log"
    argv = ["studies", "--storage", "flag.log"]
    assert build_parser(argv).parse_args(argv).storage == "flag.log"
    monkeypatch.setenv("PLENA_OPT_SERVER", "")  # empty: unset
    assert build_parser(["estimate"]).parse_args(["estimate"]).server is None


def test_model_path_takes_a_model_directory(tmp_path, capsys) -> None:
    from plena_opt.models.catalog import builtin_config

    folder = tmp_path / "My-Model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(builtin_config("llama-3.2-1b")))
    base = ["estimate", "--output-seq", "4", "--json"]
    code, by_dir, err = run(capsys, *base, "--model-path", str(folder))
    assert code == 0, err
    code, by_file, _ = run(capsys, *base, "--model-path", str(folder / "config.json"))
    assert code == 0
    code, builtin, _ = run(capsys, *base, "--model", "llama-3.2-1b")
    assert json.loads(by_dir) == json.loads(by_file)
    assert json.loads(by_dir)["model"] == "My-Model"  # single-chip document
    assert json.loads(by_dir)["tps"] == json.loads(builtin)["tps"]
    code, _, err = run(capsys, *base, "--model-path", str(tmp_path))  # no config.json in it
    assert code == 2 and err.startswith("error: ") and "config.json" in err


def test_remote_request_reads_a_model_directory(tmp_path) -> None:
    from plena_opt.cli.remote.requests import estimate_request_from_args

    folder = tmp_path / "Dir-Model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    argv = ["estimate", "--model-path", str(folder)]
    request = estimate_request_from_args(build_parser(argv).parse_args(argv))
    assert request.system.model.display_name == "Dir-Model"
    assert request.system.model.hf_config_json == '{"model_type": "llama"}'


def test_a_closed_stdout_exits_quietly_with_141() -> None:
    """`plena-opt estimate --json | head -0`: no "error: Broken pipe", the SIGPIPE status."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "plena_opt.cli.main", "estimate", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # the reader is gone before the command writes
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_BROKEN_PIPE
    assert err.decode() == ""


def test_studies_with_server_lists_what_local_mode_lists(tmp_path, capsys) -> None:
    import optuna
    from plena_server.process import ServerProcess

    from plena_opt.search.storage.storage import open_storage

    store = tmp_path / "studies.log"
    storage = open_storage(str(store))
    for name in ("b-study", "a-study"):
        study = optuna.create_study(storage=storage, study_name=name, directions=["minimize"])
        study.add_trial(optuna.trial.create_trial(value=1.0))
    code, local_json, _ = run(capsys, "studies", "--storage", str(store), "--json")
    assert code == 0
    code, local_text, _ = run(capsys, "studies", "--storage", str(store))
    with ServerProcess(store) as server:
        code, remote_json, err = run(capsys, "studies", "--server", server.target, "--json")
        assert code == 0, err
        assert json.loads(remote_json) == json.loads(local_json)
        assert [r["name"] for r in json.loads(remote_json)] == ["b-study", "a-study"]
        code, remote_text, _ = run(capsys, "studies", "--server", server.target)
        assert remote_text == local_text
    code, _, err = run(capsys, "studies", "--server", server.target)  # the server is gone
    assert code == 2 and err.startswith("error: ")  # --server names no server (issue 29)
