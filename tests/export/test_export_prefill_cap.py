"""A disaggregated deployment's prefill server runs the engine's default running cap (issue 23,
r18pfexp): ``search`` keys the prefill pool at batch 1 but prices it batching the waiting prompts
its step token budget holds (``serving.prefill_batch``), so the exported prefill command writes
no running cap (vLLM ``--max-num-seqs``, SGLang ``--max-running-requests``) whatever its key's
batch, and the token budget it was priced with; the decode server keeps its key's cap."""

from __future__ import annotations

import pytest

from plena_opt.estimate.plan import Plan
from plena_opt.export import ExportSpec, bundle
from plena_opt.export.caps import running_argv
from plena_opt.export.engines import running_cap

FLAG = {"vllm": "--max-num-seqs", "sglang": "--max-running-requests", "trtllm": "--max_batch_size"}
BUDGET = {"vllm": "--max-num-batched-tokens", "sglang": "--chunked-prefill-size"}
SPEC = ExportSpec(model="meta-llama/Llama-3.1-70B", input_len=1024, output_len=256,
                  budgets=(("vllm", 8192), ("sglang", 16384)))  # fmt: skip
KEYS = (
    "2P:tp4-ep1-dp1-pp1-cp1-replace-none-b1+3D:tp4-ep1-dp1-pp1-cp1-replace-none-b64",
    "1P:tp2-ep1-dp1-pp1-cp1-replace-full-b512+1D:tp8-ep1-dp1-pp1-cp1-replace-none-b20",
    "1P:tp2-ep1-dp2-pp1-cp1-replace-none-b3+2D:tp2-ep1-dp2-pp1-cp1-replace-none-b33",
)


def _decode_cap(engine: str, key: str) -> int:
    """The decode key's batch as one decode server's cap (``running_cap``; SGLang's flag per
    plain-DP worker)."""
    from plena_opt.export import parse_deployment_key, parse_point_key

    plan, batch, _ = parse_point_key(parse_deployment_key(key)[3])  # type: ignore[index]
    return -(-batch // plan.dp) if engine == "sglang" else running_cap(engine, plan, batch)


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_prefill_server_writes_no_running_cap(engine, key):
    servers = {c.role: c for c in bundle(key, SPEC, (engine,)) if c.role in ("prefill", "decode")}
    pre, dec = servers["prefill"], servers["decode"]
    assert not pre.refused and not dec.refused
    assert FLAG[engine] not in pre.argv
    assert pre.argv[pre.argv.index(BUDGET[engine]) + 1] == str(dict(SPEC.budgets)[engine])
    assert any(n.startswith(f"no {FLAG[engine]}: ") and "default running cap" in n
               for n in pre.notes)  # fmt: skip
    assert dec.argv[dec.argv.index(FLAG[engine]) + 1] == str(_decode_cap(engine, key))
    assert not any("default running cap" in n for n in dec.notes)


def test_trtllm_refuses_disaggregated_pools_and_would_write_no_prefill_cap():
    """trtllm-serve's disaggregated mode is not written (one refusal); its builder's cap
    argument follows the same rule as the other engines'."""
    (refused,) = bundle(KEYS[0], SPEC, ("trtllm",))
    assert refused.refused and "disaggregated" in refused.refused[0]
    plan = Plan(tp=2, dp=2)
    assert running_argv("trtllm", "prefill", plan, 7) == []
    assert running_argv("trtllm", "decode", plan, 7) == [FLAG["trtllm"], "4"]
    assert running_argv("trtllm", "serve", plan, 7) == [FLAG["trtllm"], "4"]
