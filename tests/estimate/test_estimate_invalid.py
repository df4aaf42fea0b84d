"""Every illegal input of ../shared/golden/invalid_plans.json is rejected naming the rule."""

from __future__ import annotations

import copy

import pytest
from deepstack import load_noc_profile, switch_noc

from plena_opt.errors import PlenaInputError
from plena_opt.estimate import Plan, Workload, estimate_distributed
from plena_opt.estimate.shard import moe_parallel
from plena_opt.memory import unbounded
from plena_opt.models import ModelSpec
from tests.conftest import IN_CI, SHARED, load_golden, needs_shared
from tests.golden_support import golden_model

pytestmark = needs_shared

GOLD = load_golden("invalid_plans") if SHARED.is_dir() or IN_CI else {"cases": [], "models": {}}
DIST_MODELS = load_golden("distributed")["models"] if SHARED.is_dir() or IN_CI else {}
# Where our message deliberately differs from the reference's, the fragment we assert instead.
DEVIATIONS = {
    # The reference prints a truncated model name ("s: shared experts ..."); we name the field.
    "shared experts": "shared experts",
    # The reference fails on a missing DeepStack file; plena-opt ships no traces and says so.
    "trace routing without the DeepStack trace file (qwen3_235b on gpt-oss)": "not available",
}


def _models() -> dict:
    return {**DIST_MODELS, **GOLD.get("models", {})}


def _run(inputs: dict) -> None:
    if "noc_profile" in inputs:
        load_noc_profile(copy.deepcopy(inputs["noc_profile"]))
        return
    if "config_patch" in inputs:
        name = inputs.get("model", "llama-3.1-8b")
        cfg = {**_models()[name], **inputs["config_patch"]}
        ModelSpec.from_hf_config(cfg, name)
        return
    if "num_experts" in inputs:
        p = inputs["plan"]
        moe_parallel(p.get("tp", 1), p.get("ep", 1), inputs["num_experts"], "replace")
        return
    if "model" not in inputs:
        Plan(**inputs["plan"])
        return
    name = inputs["model"]
    model = golden_model(name, _models()[name])
    n, g = (int(x) for x in inputs["noc"][len("switch_noc(") : -1].split(",")[:2])
    plan = Plan(
        **{k: v for k, v in inputs["plan"].items()}, comm_overlap=inputs.get("comm_overlap", "none")
    )
    workload = Workload(
        batch_size=inputs["batch_size"],
        input_seq_len=inputs["input_seq_len"],
        output_seq_len=inputs["output_seq_len"],
        include_lm_head=inputs.get("include_lm_head", False),
        frequency_hz=inputs.get("frequency_hz", 1e9),
        overlap_policy=inputs.get("overlap_policy", "stage-roofline"),
        routing=inputs.get("routing", "balanced"),
    )
    estimate_distributed(model, switch_noc(n, groups=g), unbounded(), plan, workload)


@pytest.mark.parametrize("case", GOLD["cases"], ids=lambda c: c["case"])
def test_invalid_input_is_rejected_with_the_rule(case):
    expected = DEVIATIONS.get(case["case"], case["message"])
    if case["error_type"] is None:
        _run(case["inputs"])
        return
    with pytest.raises(ValueError) as info:  # PlenaInputError and ProfileError are ValueErrors
        _run(case["inputs"])
    assert expected in str(info.value)
    if case["error_type"] == "TypeError":
        assert isinstance(info.value, TypeError)
    if isinstance(info.value, PlenaInputError):
        assert info.value.field
