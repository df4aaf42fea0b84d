"""``plena-opt models`` (list / show, text and JSON) and its error handling."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from plena_opt.cli.main import main
from plena_opt.models import builtin_config, list_models, load_model


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_list_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["models"], capsys)
    assert code == 0 and err == ""
    lines = out.strip().splitlines()
    assert lines[0].split()[:4] == ["name", "family", "layers", "hidden"]
    assert len(lines) == 1 + len(list_models())
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(rows) == set(list_models())
    assert rows["gpt-oss-20b"][1:7] == ["moe", "24", "2880", "64/8", "64", "32/4"]
    assert rows["llama-3.1-8b"][1:7] == ["llama", "32", "4096", "32/8", "128", "-"]
    assert rows["qwen3-235b-a22b"][-1] == "external"


def test_list_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["models", "--json"], capsys)
    assert code == 0
    rows = json.loads(out)["models"]
    assert [r["name"] for r in rows] == list_models()
    by_name = {r["name"]: r for r in rows}
    for name in ("gpt-oss-20b", "fictional-moe-128", "llama-3.2-1b"):
        described = load_model(name).describe()
        assert {k: by_name[name][k] for k in described} == described
    assert by_name["llama-3.2-1b"]["tie_word_embeddings"] is True
    assert by_name["fictional-moe-128"]["moe_intermediate_size"] == 256
    assert by_name["mixtral-8x7b"]["external"] is True


def test_show_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["models", "show", "gpt-oss-20b"], capsys)
    assert code == 0
    fields = dict(line.split(":", 1) for line in out.strip().splitlines())
    assert fields["num_experts"].strip() == "32" and fields["family"].strip() == "moe"
    assert "12 sliding_attention, 12 full_attention" in fields["layer_types"]
    code, out, _ = _run(["models", "show", "fictional-moe-128", "--json"], capsys)
    detail = json.loads(out)
    assert (
        "top_k" not in detail and detail["mlp_types"] == ["moe"] * 4
    )  # one name: experts_per_token
    assert detail["experts_per_token"] == 8 and detail["origin"] == "fixture"
    code, out, _ = _run(["models", "--json", "show", "llama-3.1-8b"], capsys)
    assert json.loads(out)["head_dim"] == 128


def test_show_model_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(dict(builtin_config("fictional-24-head"), num_hidden_layers=3)))
    code, out, _ = _run(["models", "show", "--model-path", str(path), "--json"], capsys)
    assert code == 0
    detail = json.loads(out)
    assert detail["name"] == "tiny" and detail["layers"] == 3 and "source" not in detail


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["models", "show", "llama-9"], "unknown model 'llama-9'; choose one of:"),
        (["models", "show"], "exactly one of NAME or --model-path"),
        (["models", "show", "llama-3.1-8b", "--model-path", "x.json"], "exactly one"),
        (["models", "show", "--model-path", "/nonexistent/config.json"], "cannot read"),
    ],
)
def test_errors_exit_2(argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(argv, capsys)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and fragment in err
    assert "Traceback" not in err


def test_bad_config_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(builtin_config("llama-3.1-8b"), num_key_value_heads=5)))
    code, _, err = _run(["models", "show", "--model-path", str(path)], capsys)
    assert code == 2
    assert err == "error: num_attention_heads must be a multiple of num_key_value_heads\n"


def _console_script() -> str:
    script = Path(sys.executable).with_name("plena-opt")
    if not script.exists():
        pytest.skip("the plena-opt console script is not installed beside this interpreter")
    return str(script)


def test_installed_console_script() -> None:
    script = _console_script()
    done = subprocess.run([script, "models", "--json"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert [r["name"] for r in json.loads(done.stdout)["models"]] == list_models()
    bad = subprocess.run([script, "models", "show", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: unknown model 'nope'")


def test_models_model_path_shows_that_config(tmp_path, capsys) -> None:
    from plena_opt.cli.main import main

    cfg = {
        "hidden_size": 1536,
        "num_attention_heads": 24,
        "num_key_value_heads": 6,
        "num_hidden_layers": 2,
        "intermediate_size": 4096,
        "vocab_size": 32000,
    }
    path = tmp_path / "tiny" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg))
    assert main(["models", "--model-path", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["hidden_size"] == 1536 and doc["heads"] == 24
