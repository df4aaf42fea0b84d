"""Hardware sanity of ``validate --measurements`` predictions on GPUs and models the calibration
file does not hold (issue 23): the sweep of ``validate.serving_sanity`` on a small grid breaks no
invariant, prices every deployable row, and refuses only rows no engine can run as written."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import pytest

from plena_opt.validate.serving_rows import Refused, ServingRow
from plena_opt.validate.serving_sanity import (
    Case,
    check,
    memory_bound,
    price,
    row_of,
    small_grid,
)
from plena_opt.validate.serving_score import RowResult, _price_row, step_model

INVARIANTS = ("h200_le_h100", "b300_le_b200", "gb200_vs_b200_sxm", "gb300_vs_b300_sxm",
              "fp8_le_bf16", "fp4_le_fp8", "tpot_vs_concurrency", "ttft_vs_input",
              "tp_low_concurrency", "mi325x_vs_h200")  # fmt: skip
# what a deployable-looking row may be refused for: NVFP4 weights on a GPU without FP4 tensor
# cores (Hopper, MI325X), weights larger than one GPU's memory
EXPECTED_REFUSALS = ("has no fp4 tensor cores", "the weights do not fit")


@cache
def _sweep() -> dict[Case, RowResult]:
    return price(small_grid())


def test_small_grid_breaks_no_hardware_invariant() -> None:
    res = _sweep()
    assert 300 <= len(res) <= 800
    checked = check(res)
    assert checked.violations == [], "\n".join(map(str, checked.violations[:20]))
    for inv in INVARIANTS:  # each invariant compared on enough pairs to mean something
        assert checked.compared[inv] >= 10, (inv, checked.compared)


def test_every_deployable_row_of_the_grid_is_priced() -> None:
    res = _sweep()
    refused = {c: r.reason for c, r in res.items() if r.status == "refused"}
    for c, reason in refused.items():
        assert any(s in reason for s in EXPECTED_REFUSALS), (c.row_id, reason)
        if "fp4 tensor cores" in reason:
            assert c.fmt == "fp4" and c.system in ("h100_sxm", "h200_sxm", "mi325x")
    held_out = [c for c in res if c.system in ("h200_sxm", "b300_sxm", "gb200", "gb300",
                                               "mi325x")]  # fmt: skip
    priced = [c for c in held_out if c not in refused]
    assert len(priced) / len(held_out) >= 0.85  # the rest: NVFP4 on H200 / MI325X only


def test_a_violation_is_reported() -> None:
    """The check can fail: an H200 row priced slower than its H100 twin is a violation."""
    res = dict(_sweep())
    c = next(c for c, r in res.items() if c.system == "h200_sxm" and r.status == "priced"
             and c.model == "llama-3.3-70b" and c.concurrency == 1)  # fmt: skip
    h100 = res[replace(c, system="h100_sxm")]
    res[c] = replace(res[c], tpot_ms=1.5 * h100.tpot_ms)  # type: ignore[operator]
    assert "h200_le_h100" in [v.invariant for v in check(res).violations if v.a == c]
    assert check(_sweep()).violations == []


def test_weights_larger_than_the_gpu_are_refused_not_priced() -> None:
    """DeepSeek-R1 (671 B fp8 weights) on one H100 was priced (19.9 ms TPOT): no engine starts
    it. 8 x H200 holds it (84 GB a GPU of 150.8 GB) and is priced."""
    one = Case("h100_sxm", "vllm", "deepseek-r1", "fp8", 1, 1, 1024, 1024)
    r = _price_row(row_of(one), {}, {})
    assert r.status == "refused" and "the weights do not fit: 671.0 GB per GPU" in r.reason
    assert "1-GPU worker against the 85.5 GB of one h100-sxm" in r.reason
    eight = replace(one, system="h200_sxm", tp=8)
    assert _price_row(row_of(eight), {}, {}).status == "priced"
    # the pipeline path checks the fullest stage: Llama-3.3-70B bf16 (141 GB) over two H100
    # stages of one GPU each is 70.6 GB a GPU and fits; on one H100 it does not
    row = {**row_of(replace(one, model="llama-3.3-70b", fmt="bf16")).fields}
    assert "weights do not fit" in _price_row(ServingRow("x", row), {}, {}).reason
    assert _price_row(ServingRow("x", {**row, "pp_size": "2"}), {}, {}).status == "priced"


def test_a_disaggregated_worker_that_does_not_fit_is_refused() -> None:
    """Each pool's worker is checked: a one-GPU DeepSeek-R1 prefill worker is refused, the same
    deployment with 8-GPU prefill workers (84 GB a GPU on H200) priced."""
    row = {**row_of(Case("h200_sxm", "sglang", "deepseek-r1", "fp8", 8, 64, 1024, 1024)).fields,
           "mode": "disagg", "prefill_num_workers": "1", "decode_num_workers": "1"}  # fmt: skip
    for role in ("prefill", "decode"):
        row |= {f"{role}_tp_size": "8", f"{role}_moe_tp_size": "1", f"{role}_moe_ep_size": "8"}
    assert _price_row(ServingRow("x", row), {}, {}).status == "priced"
    one = row | {"prefill_tp_size": "1", "prefill_moe_ep_size": "1"}
    r = _price_row(ServingRow("x", one), {}, {})
    assert r.status == "refused" and "1-GPU worker" in r.reason, r.reason


def test_step_model_refuses_what_does_not_fit() -> None:
    """DeepSeek-R1 NVFP4 on one B200: 393.9 GB of weights (NVFP4 experts and dense MLPs, the
    checkpoint's MLA projections at bf16, r13dsr1) against 192.3 GB is refused naming both."""
    from plena_opt.validate.serving_rows import resolve

    d = resolve(row_of(Case("b200_sxm", "sglang", "deepseek-r1", "fp4", 1, 1, 1024, 1024)))
    with pytest.raises(Refused, match="393.9 GB per GPU"):
        step_model(d)


def test_memory_bound_is_the_weight_streaming_share_of_tpot() -> None:
    """Llama-3.3-70B bf16 on one B200 streams 139 GB a step: 17.4 ms at 8 TB/s; a TPOT of 26.7
    ms is memory-bound, and the same bytes against a 100 ms TPOT are not."""
    c = Case("b200_sxm", "vllm", "llama-3.3-70b", "bf16", 1, 1, 1024, 1024)
    assert memory_bound(c, 26.7) and not memory_bound(c, 100.0)
