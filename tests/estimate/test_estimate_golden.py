"""Replay every case of ../shared/golden/distributed.json and single_chip.json (rel 1e-9)."""

from __future__ import annotations

import pytest

from plena_opt.estimate import (
    Plan,
    Workload,
    estimate_decoder_latency,
    estimate_distributed,
    reference_script_estimate,
)
from tests.conftest import IN_CI, SHARED, load_golden, needs_shared
from tests.golden_support import diff, golden_memory, golden_model, golden_noc

pytestmark = needs_shared

DIST = load_golden("distributed") if SHARED.is_dir() or IN_CI else {"cases": []}
SINGLE = load_golden("single_chip") if SHARED.is_dir() or IN_CI else {"cases": []}


def _run_distributed(case: dict) -> dict:
    i = case["inputs"]
    model = golden_model(i["model"], DIST["models"][i["model"]])
    noc = golden_noc(DIST["nocs"][i["noc"]])
    memory = golden_memory(DIST["memories"][i["memory"]])
    p = i["plan"]
    plan = Plan(p["tp"], p["ep"], p["dp"], p["pp"], p["cp"], p["moe_tp_mode"], i["comm_overlap"])
    workload = Workload(
        batch_size=i["batch_size"],
        input_seq_len=i["input_seq_len"],
        output_seq_len=i["output_seq_len"],
        frequency_hz=i["frequency_hz"],
        overlap_policy=i["overlap_policy"],
        include_lm_head=i["include_lm_head"],
        routing=i["routing"],
    )
    return estimate_distributed(model, noc, memory, plan, workload).to_dict()


@pytest.mark.parametrize("case", DIST["cases"], ids=lambda c: f"case{c['id']}")
def test_distributed_case_matches_reference(case):
    out = _run_distributed(case)
    problems = diff(case["output"], out)
    assert not problems, "\n".join(problems[:20])


SC_EST = [c for c in SINGLE["cases"] if c["kind"] == "estimate_decoder_latency"]
SC_SCRIPT = [c for c in SINGLE["cases"] if c["kind"] != "estimate_decoder_latency"]


@pytest.mark.parametrize(
    "case",
    SC_EST,
    ids=lambda c: (
        "{model}-{memory}-{batch_size}-{input_seq_len}-{output_seq_len}-lm{include_lm_head}".format(
            **c["inputs"]
        )
    ),
)
def test_single_chip_estimate_matches_reference(case):
    i = case["inputs"]
    model = golden_model(i["model"], SINGLE["models"][i["model"]])
    memory = golden_memory(SINGLE["memories"][i["memory"]])
    out = estimate_decoder_latency(
        model,
        memory,
        batch_size=i["batch_size"],
        input_seq_len=i["input_seq_len"],
        output_seq_len=i["output_seq_len"],
        frequency_hz=i["frequency_hz"],
        overlap_policy=i["overlap_policy"],
        include_lm_head=i["include_lm_head"],
    ).to_dict()
    problems = diff(case["output"], out)
    assert not problems, "\n".join(problems[:20])


@pytest.mark.parametrize(
    "case",
    SC_SCRIPT,
    ids=lambda c: "{model}-{batch_size}-{input_seq_len}-{output_seq_len}-d{device_num}".format(
        kind=c["kind"], **c["inputs"]
    ),
)
def test_reference_scripts_match(case):
    i = case["inputs"]
    model = golden_model(i["model"], SINGLE["models"][i["model"]])
    out = reference_script_estimate(
        model,
        batch_size=i["batch_size"],
        input_seq_len=i["input_seq_len"],
        output_seq_len=i["output_seq_len"],
        device_num=i["device_num"],
        frequency_hz=i["frequency_hz"],
    )
    problems = diff(case["output"], out)
    assert not problems, "\n".join(problems)
