"""A GPU plan's EP all-to-all: continuous across the 8,192-token threshold, combine in bf16
(issue 23, r18a2a; benchmarks/README_serving.md "r18pfcap" found the jump).

DeepSeek-R1 on one hgx-b200x8 node at EP 8, power-law routing (what ``validate`` prices): below
8,192 tokens the routed rows send a token once per distinct remote rank (~4.6 of 7), at or above
the closed form used to send top-k/ep copies to every rank (7 a token, times the busiest rank's
pair imbalance ~1.5): the dispatch jumped 110.7 → 171.2 µs a layer from 8,191 to 8,192 tokens
(+55 % a token). GPU pricing now counts distinct ranks there too; the PLENA reference keeps
network-model §8.2 (tests/deepstack golden vectors).
"""

from __future__ import annotations

import pytest
from deepstack import load_noc_profile

from plena_opt.chip import load_chip
from plena_opt.estimate import Evaluator, Plan, Workload
from plena_opt.estimate.gpu import gpu_memory
from plena_opt.estimate.reference import plan_layout
from plena_opt.estimate.reference.collectives import layer_collectives
from plena_opt.models import load_model

MODEL = load_model("deepseek-ai/DeepSeek-R1")


def _prefill(tokens: int, precision: str) -> tuple[Evaluator, dict]:
    chip = load_chip("b200")
    w = Workload(batch_size=1, input_seq_len=tokens, output_seq_len=2, precision=precision,
                 routing="power_law")  # fmt: skip
    ev = Evaluator(MODEL, load_noc_profile("hgx-b200x8"), gpu_memory(chip), w, chip)
    return ev, ev.estimate(Plan(ep=8)).prefill["stages"][0]["comm_seconds"]


@pytest.mark.parametrize("precision", ["fp8", "fp4"])
def test_dispatch_per_token_is_continuous_across_8192_tokens(precision: str) -> None:
    (_, below), (_, at) = _prefill(8191, precision), _prefill(8192, precision)
    per_token = [c["ep_dispatch"] / t for c, t in ((below, 8191), (at, 8192))]
    assert per_token[1] == pytest.approx(per_token[0], rel=0.03)


def test_combine_carries_bf16_and_the_dispatch_the_plans_activations() -> None:
    """fp8 and fp4 dispatch at their bytes; every combine at bf16's, so all three combines are
    equal and a bf16 plan's combine equals its dispatch."""
    runs = {p: _prefill(4096, p)[1] for p in ("bf16", "fp8", "fp4")}
    assert runs["bf16"]["ep_combine"] == runs["bf16"]["ep_dispatch"]
    assert runs["fp8"]["ep_combine"] == runs["fp4"]["ep_combine"] == runs["bf16"]["ep_combine"]
    assert runs["fp4"]["ep_dispatch"] < runs["fp8"]["ep_dispatch"] < runs["fp8"]["ep_combine"]


@pytest.mark.parametrize("tokens", [4096, 8192])
def test_the_reference_walk_prices_the_gpu_exchange_alike(tokens: int) -> None:
    """``estimate.reference`` (one function a collective) gives the fast path's dispatch and
    combine for a GPU plan, routed and closed-form."""
    ev, comm = _prefill(tokens, "fp8")
    lay = plan_layout(ev.ctx, Plan(ep=8))
    moe = next(k for k in ev.ctx.distinct_kinds if k.moe)
    ref = layer_collectives(lay, moe, "prefill", tokens)
    layers = sum(n for k, n in ev.ctx.kind_runs if k.moe)
    assert layers == MODEL.moe_layers == 58
    for name in ("ep_dispatch", "ep_combine"):
        assert comm[name] == pytest.approx(ref[name].seconds * layers, rel=1e-12)
    assert ref["ep_combine"].seconds > ref["ep_dispatch"].seconds
