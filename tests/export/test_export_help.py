"""``plena-opt export --help`` and the scripts' headers say what they write (r18qa)."""

from __future__ import annotations

import re
from pathlib import Path

from plena_opt.cli.main import main
from plena_opt.export import ENGINES, ExportSpec, plan_bundle

ROOT = Path(__file__).parents[2]


def _help(capsys, *argv: str) -> str:
    try:
        main([*argv, "--help"])
    except SystemExit:
        pass
    return " ".join(capsys.readouterr().out.split())


def test_the_command_list_names_every_engine_export_writes(capsys):
    text = _help(capsys)
    line = text[text.index("export ") : text.index("export ") + 120]
    assert "TensorRT-LLM" in line and "SGLang" in line and "vLLM" in line


def test_the_memory_fraction_says_its_unit_and_each_engines_flag(capsys):
    text = _help(capsys, "export")
    flag = text[text.rindex("--memory-fraction MEMORY_FRACTION") :][:500]
    for needle in ("share of", "--gpu-memory-utilization", "fraction-static",
                   "free_gpu_memory_fraction", "default: 0.9"):  # fmt: skip
        assert needle in flag, needle
    seq = text[text.rindex("--input-seq INPUT_SEQ") :][:200]
    assert "stored study" in seq  # the default with --study is the study's workload


def test_every_cited_test_file_exists():
    """The scripts print each engine's ``source``: a test path there must exist."""
    for name, eng in ENGINES.items():
        for path in re.findall(r"tests/[\w/]+\.py", eng["source"]):
            assert (ROOT / path).is_file(), (name, path)
    spec = ExportSpec(model="meta-llama/Llama-3.1-8B", input_len=8, output_len=8)
    (c,) = [c for c in plan_bundle("vllm", "tp1-ep1-dp1-pp1-cp1-replace-none-b1", spec)
            if c.role == "serve"]  # fmt: skip
    assert "tests/export/test_export_engine_parsers.py" in c.script()
