"""The steady-state figures and the step costs they read stay those of the code before the serving
model was made cheaper (issue 26: a plan under load at most 2x its static cost).

``tests/data/serving_steady_figures.json`` holds every ``ServingMetrics`` figure of
``closed_loop`` and ``open_loop`` over the grid below (a dense and a MoE model on 8x H100, TP,
attention DP x EP, a DP replica and a 2-stage pipeline; vLLM, SGLang and TensorRT-LLM; C = 4,
64, 256; 1k/1k, 8k/1k and 2k/256; fixed and drawn lengths; Poisson rates at 0.2 and 0.8 of the
closed loop's throughput), as commit 4f6c0e9 computed them (re-recorded once since, on purpose: the
engine's all-reduce became the node table's lower envelope, ``estimate.engine_network``, which
moved 129 figures of the DP 2 and PP 2 plans by at most 1.7e-4 relative; r10ttft: a
drawn-length follow-up misses the step in flight, ``serving.request_path``, which moved the 324
drawn-length figures, closed-loop TTFT up to 1.79x, and the open loops priced at those rates;
and three open-loop figure sets at 0.8 of the C = 256 rate, SGLang / TensorRT-LLM 1k/1k fixed
lengths, replaced by hand, r10cold: the open loop's search from below keeps the lowest of two
roots where a decode batch beyond the CUDA-graph limit turns the fixed point again,
``tests/serving/test_spine.py``; r11moe: experts split EP over exactly the attention TP group
exchange no tokens, one TP all-reduce (``estimate.comm.replicated_expert_parallel``), which moved
the 162 figures of the Qwen3-235B TP 4 x DP 2 plan by up to 16 %; and the lead after r12consist:
a prefill-first engine's prompt step decodes nobody in the open loop's steady form too, which
moved the 144 SGLang open-loop figures; r15h200: the H100 profile's GH100 die constants fitted
jointly with the H200 table (GEMM fixed time and blend, decode-attention constants with the HBM
efficiency from the bandwidth-bound rows, ``validate.calibrate_die``), which moved 5,094 of
the 5,184 figures by -3.4 % to +5.3 %, median 0.27 %; r16async: vLLM 0.34.0 runs async
(overlap) scheduling by default, ``serving.vllm_async``, which moved 1,586 figures of the 216
vLLM cases, closed-loop TTFT x1.01 to x1.44, median x1.12, TPOT by at most -0.8 %; r16bytes:
the fp8 GEMM and fused-MoE fits and pricing count the same bytes, the tables' input quantisation
passes included, fused in TensorRT-LLM (``chip.gpu.kernel_bytes``; profiles and TensorRT-LLM
decode scales refitted), which moved 5,094 figures by -7.3 % to +9.8 %, 98 % of them within
-3.6 … +5.5 %, median 0.00 %; r18a2a: a GPU plan's EP dispatch counts one copy per distinct
destination rank at ≥ 8,192 tokens too and its combine carries bf16, ``comm.ep_exchange``,
which moved the 162 figures of the Qwen3-235B EP 8 plan by -8.7 % to +7.0 %, median -0.08 %):
each
plan priced whole by the evaluator at every batch size (``Evaluator.evaluate`` /
``estimate``) and every bisection step through ``min``/``max`` calls. A fresh step model per
figure must give the recorded figures (relative 1e-12: the recording is exact on this platform,
as ``test_evaluator_fixture``'s; the margin only allows another libm). Re-record (only when a
deliberate model change moves figures)::

    python benchmarks/_compare.py --source DIR tests/serving/test_step_costs.py --record OUT.json
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, replace
from pathlib import Path

import pytest

DATA = Path(__file__).parents[1] / "data" / "serving_steady_figures.json"
REL = 1e-12
PLANS = {"llama-3.1-70b": ({"tp": 8}, {"tp": 4, "pp": 2}), "qwen3-235b-a22b": ({"ep": 8},
         {"tp": 4, "dp": 2})}  # fmt: skip
ENGINES = ("vllm", "sglang", "trtllm")
LENGTHS = ((1024, 1024), (8192, 1024), (2048, 256))


def _env() -> tuple:
    from deepstack import load_noc_profile

    from plena_opt.chip import load_chip
    from plena_opt.estimate.gpu import gpu_memory

    chip = load_chip("h100-sxm")
    return chip, load_noc_profile("hgx-h100x8"), gpu_memory(chip)


def figures() -> dict[str, list[float | None] | str]:
    """Every figure of the grid, by case (``ServingMetrics`` in field order, ``_values``; a refusal:
    its message)."""
    from plena_opt.errors import PlenaInputError
    from plena_opt.estimate import Plan, Workload
    from plena_opt.estimate.disaggregated import sub_noc
    from plena_opt.models import load_model
    from plena_opt.serving import (
        OpenLoopWorkload,
        ServingWorkload,
        closed_loop,
        engine_model,
        open_loop,
    )
    from plena_opt.serving.pipeline import in_flight_load

    chip, noc, mem = _env()
    out: dict[str, list[float | None] | str] = {}
    for name, plans in PLANS.items():
        model = load_model(name)
        for fields in plans:
            plan = replace(Plan(**fields), dp=1)
            inputs = (model, noc if plan.world_size == 8 else sub_noc(noc, plan.world_size), mem,
                      chip)  # fmt: skip
            for eng_name in ENGINES:
                eng = engine_model(eng_name, float(chip.hbm.capacity_bytes.value))
                for isl, osl in LENGTHS:
                    wl = Workload(batch_size=1, input_seq_len=isl, output_seq_len=osl,
                                  precision="fp8")  # fmt: skip
                    for ratio in (0.0, 0.8):
                        for c in (4, 64, 256):
                            key = f"{name}|{fields}|{eng_name}|{isl}/{osl}|{ratio}|{c}"
                            step, clients, _, _ = in_flight_load(inputs, wl, plan, eng, c, None,
                                                                 None, ratio)  # fmt: skip
                            m = closed_loop(step, ServingWorkload(clients, isl, osl, ratio))
                            out[key + "|closed"] = _values(m)
                            for share in (0.2, 0.8):
                                rate = share * m.request_throughput_per_s
                                step, _, r, _ = in_flight_load(inputs, wl, plan, eng, None, rate,
                                                               None, ratio)  # fmt: skip
                                try:
                                    o = open_loop(step, OpenLoopWorkload(r, isl, osl, ratio))
                                    out[f"{key}|open{share}"] = _values(o)
                                except PlenaInputError as exc:
                                    out[f"{key}|open{share}"] = str(exc)
    return out


def _values(m: object) -> list[float | None]:
    """``m``'s fields in order, the trailing unset ones (percentiles: a replay's) dropped."""
    out = list(asdict(m).values())  # type: ignore[call-overload]
    while out and out[-1] is None:
        out.pop()
    return out


def _same(a: object, b: object) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return len(a) == len(b) and all(  # type: ignore[arg-type]
        x == y or (x is not None and y is not None and math.isclose(x, y, rel_tol=REL))
        for x, y in zip(a, b, strict=True)  # type: ignore[call-overload]
    )


def test_steady_state_figures_are_those_recorded() -> None:
    want = json.loads(DATA.read_text())
    got = figures()
    assert got.keys() == want.keys()
    bad = [k for k in want if not _same(got[k], want[k])]
    assert not bad, f"{len(bad)} of {len(want)} figures moved, e.g. {bad[:3]}"


@pytest.mark.parametrize(("name", "fields"), [("llama-3.1-70b", {"tp": 8}),
                                              ("qwen3-235b-a22b", {"ep": 8}),
                                              ("qwen3-235b-a22b", {"tp": 4, "ep": 2})])  # fmt: skip
def test_step_costs_are_the_evaluators_report_figures(name: str, fields: dict) -> None:
    """Each step cost is the figure the evaluator's full report gives (the step costs price
    only the passes they read): a prefill of k prompts is the k-prompt, one-token report's
    prefill ``latency_seconds``, a first decode step its ``first_token_decode`` one (with one
    pipeline stage read from the whole decode pass, whose step 0 has the same KV length), and
    a mean step 1 / ``tps_per_sequence`` of the whole output."""
    from plena_opt.estimate import Evaluator, Plan, Workload
    from plena_opt.estimate.gpu_queue import EvaluatorStepCosts
    from plena_opt.models import load_model

    chip, noc, mem = _env()
    model, plan = load_model(name), Plan(**fields)
    for isl, osl in ((1024, 1024), (8192, 256)):
        wl = Workload(batch_size=1, input_seq_len=isl, output_seq_len=osl, precision="fp8")
        costs = EvaluatorStepCosts(model, noc, mem, chip, wl, plan)
        for b in (1, 2, 8, 64, 512):
            one = Evaluator(model, noc, mem, replace(wl, batch_size=b, output_seq_len=1), chip)
            est = one.estimate(plan)
            whole = Evaluator(model, noc, mem, replace(wl, batch_size=b), chip).evaluate(plan)
            if b <= 8:
                assert costs.prefill_seconds(b * isl) == est.prefill["latency_seconds"]
            assert costs.decode_seconds(b) == est.first_token_decode["latency_seconds"]
            assert costs.decode_mean_seconds(b) == 1.0 / whole.tps_per_sequence


def test_pipeline_turns_are_those_of_the_report() -> None:
    """A pp plan's step costs are one turn of its in-flight batches, read from the passes as
    the full report states them: prefill ``max(k · period, latency + transfer)``, first decode
    step ``k · period``."""
    from plena_opt.estimate import Evaluator, Plan, Workload
    from plena_opt.estimate.disaggregated import sub_noc
    from plena_opt.estimate.engine_network import engine_network
    from plena_opt.models import load_model
    from plena_opt.serving.pipeline import PipelineStepCosts

    chip, noc, mem = _env()
    model, plan, k = load_model("llama-3.1-70b"), Plan(tp=2, pp=2), 2
    noc = sub_noc(noc, plan.world_size)
    wl = Workload(batch_size=1, input_seq_len=2048, output_seq_len=256, precision="fp8")
    costs = PipelineStepCosts(model, noc, mem, chip, wl, plan, None, in_flight=k)
    engine_noc = engine_network(noc)  # the engine's all-reduce, as the step costs price it
    for b in (1, 2, 4, 16):
        ev = Evaluator(model, engine_noc, mem, replace(wl, batch_size=b * k, output_seq_len=1),
                       chip)  # fmt: skip
        est = ev.estimate(plan)
        pre, dec = est.prefill, est.first_token_decode
        trip = pre["latency_seconds"] + pre["transfer_seconds"]
        assert costs.prefill_seconds(b * 2048) == max(k * pre["period_seconds"], trip)
        assert costs.decode_seconds(b) == k * dec["period_seconds"]


if __name__ == "__main__" and sys.argv[1:2] == ["--record"]:
    rows = sorted(figures().items())  # one case a line
    body = ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in rows)
    Path(sys.argv[2]).write_text("{\n" + body + "\n}\n")
