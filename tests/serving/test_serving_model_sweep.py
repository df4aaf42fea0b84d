"""Every model the product ships or is tested on, priced under load on a default deployment.

Issue 24: every config in ``../shared`` (the golden files' ``models``, and the tests/shared copy)
and every catalog model is either priced under a serving load (a closed loop of 8 clients,
1k/256 tokens, vLLM's scheduler on one 8×H100 node, TP 8, the model's checkpoint format) or
refused with ``error: …`` naming the field or flag and the rule (exit 2) — never a traceback, and
a priced result is the model asked for (its own name and layer count), not a neighbour.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from plena_opt.cli.main import main
from plena_opt.models.catalog import list_models
from tests.conftest import SHARED, UPSTREAM

DEPLOYMENT = ["--chip", "h100-sxm", "--noc", "hgx-h100x8", "--tp", "8", "--input-seq", "1024",
              "--output-seq", "256", "--concurrency", "8", "--engine", "vllm",
              "--json"]  # fmt: skip


def _golden_configs(root: Path) -> list[tuple[str, dict]]:
    out = []
    for path in sorted((root / "golden").glob("*.json")):
        models = json.loads(path.read_text()).get("models") or {}
        out += [(f"{root.name}/{path.stem}/{name}", cfg) for name, cfg in models.items()]
    return out


def _price(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        rc = main(argv + DEPLOYMENT)
    except SystemExit as exc:  # argparse refusals exit 2 with "error:" on stderr
        rc = int(exc.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def _check(rc: int, out: str, err: str, name: str | None, layers: int | None) -> str:
    """'priced' or 'refused', asserting what each must carry."""
    assert "Traceback" not in err
    if rc == 2:
        assert err.startswith("error: ") and len(err.strip()) > len("error: "), err
        return "refused"
    assert rc == 0, err
    doc = json.loads(out)
    load = doc["serving_under_load"]["replay"]
    for key in ("ttft_seconds", "tpot_seconds"):
        assert math.isfinite(load[key]["mean"]) and load[key]["mean"] > 0
    if name is not None:
        assert doc["model"]["name"] == name
    if layers is not None:
        assert doc["model"]["layers"] == layers
    return "priced"


# catalog models TP 8 cannot split (their heads), refused naming the rule
REFUSED_AT_TP8 = {"fictional-24-head": "tp=8 and the 6 KV heads", "qwen2.5-7b": "tp=8 does not"}


@pytest.mark.parametrize("name", list_models())
def test_every_catalog_model_is_priced_or_refused_by_name(name, capsys):
    rc, out, err = _price(["estimate", "--model", name], capsys)
    status = _check(rc, out, err, name=name, layers=None)
    if name in REFUSED_AT_TP8:
        assert status == "refused" and REFUSED_AT_TP8[name] in err


def _all_golden() -> list[tuple[str, dict]]:
    """Each distinct model config of tests/shared and of ../shared (where present)."""
    seen: dict[str, tuple[str, dict]] = {}
    for root in (SHARED, UPSTREAM):
        if root.is_dir():
            for key, cfg in _golden_configs(root):
                seen.setdefault(json.dumps(cfg, sort_keys=True), (key, cfg))
    return list(seen.values())


GOLDEN = _all_golden()


@pytest.mark.parametrize(("key", "config"), GOLDEN, ids=[k for k, _ in GOLDEN])
def test_every_shared_config_is_priced_or_refused_by_name(key, config, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    rc, out, err = _price(["estimate", "--model-path", str(path)], capsys)
    layers = config.get("num_hidden_layers") if rc == 0 else None
    assert _check(rc, out, err, name=None, layers=layers) in ("priced", "refused"), key


def test_the_sweep_covers_the_shared_configs():
    assert len(GOLDEN) >= 6  # llama-3.1-8b/70b, llama-3.2-1b, gpt-oss-20b, two fictional


def test_the_sweep_prices_and_refuses_with_reasons(capsys):
    # the catalog's dense Llama prices; a made-up name is refused naming --model
    assert _check(*_price(["estimate", "--model", "llama-3.1-8b"], capsys), "llama-3.1-8b", 32) == (
        "priced"
    )
    rc, out, err = _price(["estimate", "--model", "no-such-model-xyz"], capsys)
    assert _check(rc, out, err, None, None) == "refused" and "model" in err
