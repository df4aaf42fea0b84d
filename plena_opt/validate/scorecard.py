"""Accuracy scorecard: the product's predictions against the public measurements it ships.

``fig09`` (``data/fig09/*.csv``, DeepStack's published vLLM runs on 8x B200, TP 8, 1k in / 1k
out, CUDA graphs on, ``System Decode TPS``; spec validation-data.md §3) is priced with the
``b200`` chip on ``hgx-b200x8``, bf16, plan TP 8 (MoE experts tensor-parallel, vLLM's default
without ``--enable-expert-parallel``), batch = the run's BS, MoE routing ``power_law`` (real
routers load a few experts heavily, so a step reads fewer distinct experts than uniform
``random`` routing would; the load exponent is AIConfigurator's published estimate per model,
``estimate.moe_load.POWER_LAW_ALPHA``, not fitted here), weights at the checkpoint's format
(``CHECKPOINT_PRECISION``).
``fig09_prefill``: the same runs' ``System Prefill TPS`` column (all BS prompts of 1,024 tokens over
the time until the last first token, as the column's values imply: for the dense models at
BS ≥ 64 the measured user/system ratio is within 7 % of the harmonic number of BS/8 groups of
first tokens, vLLM's 8,192-token step budget), predicted by replaying vLLM's chunked-prefill
scheduler for a burst of BS requests (``estimate.gpu_queue``), not by one static prefill pass.
``fig09_ttft``: the ``User Prefill Speed`` column (the mean over requests of 1,024 / own TTFT,
as its values imply), from the same replay.
``fig09_tpot``: the same runs' time per output token, 1 / ``User Decode Speed`` (seconds), from
the same replay run to the end of the 1,024-token outputs (each request's (last − first token
time) / 1,023, so the decode steps shared with other requests' prompt chunks count).
The prefill steps pay the eager forward's host time (``estimate.gpu_host``; its two constants
are fitted on the Eager_Mode=True rows, which are not scored).
``fig08`` (``fig08.py``) prices measured fused GEMM + collective kernels on 8x H100.
No constant is fitted on any of the scored points.
Models the catalog lacks are listed as skipped.
"""

from __future__ import annotations

import csv
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from plena_opt.validate.points import Point, data_dir

if TYPE_CHECKING:
    from plena_opt.estimate.gpu_queue import BurstTtft

FIG09_FILES = {
    "llama-3.1-70b": "benchmark_summary_llama_3_70b.csv",
    "llama-3.1-405b": "benchmark_summary_llama_3_405b.csv",
    "qwen3-235b-a22b": "benchmark_summary_qwen_235b.csv",
    "deepseek-v3": "vllm_b200_benchmark_summary.csv",
}
FIG09_MAX_BS = 512  # the 40 compared points of the paper (BS 1-512)
# The weights' format of the published checkpoint vLLM loads (HF ``quantization_config``):
# DeepSeek-V3 ships FP8 (e4m3, 128x128 block scales); the others ship bf16.
CHECKPOINT_PRECISION = {"deepseek-v3": "fp8"}
FIG09_MOE_ROUTING = "power_law"


@dataclass(frozen=True)
class ModelScore:
    dataset: str
    model: str
    points: int
    mape: float  # percent
    bias: float  # mean signed error, percent
    worst: float  # signed error of the worst point, percent
    worst_batch: int


@dataclass
class Scorecard:
    points: list[Point] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def by_model(self) -> list[ModelScore]:
        out = []
        keys = dict.fromkeys((p.dataset, p.model) for p in self.points)
        for ds, model in keys:
            pts = [p for p in self.points if p.dataset == ds and p.model == model]
            out.append(_score(ds, model, pts))
        return out

    def overall(self, dataset: str) -> ModelScore:
        return _score(dataset, "all", [p for p in self.points if p.dataset == dataset])

    def to_dict(self) -> dict:
        datasets = sorted({p.dataset for p in self.points})
        return {
            "datasets": {d: asdict(self.overall(d)) for d in datasets},
            "models": [asdict(s) for s in self.by_model()],
            "points": [{**asdict(p), "error": p.error} for p in self.points],
            "skipped": dict(self.skipped),
        }


def _score(dataset: str, model: str, pts: list[Point]) -> ModelScore:
    errs = [p.error for p in pts]
    worst = max(pts, key=lambda p: abs(p.error))
    return ModelScore(
        dataset,
        model,
        len(pts),
        100 * sum(abs(e) for e in errs) / len(errs),
        100 * sum(errs) / len(errs),
        100 * worst.error,
        worst.batch_size,
    )


def fig09_measurements(
    folder: Path | None = None, column: str = "System Decode TPS"
) -> dict[str, list[tuple[int, float]]]:
    """model → [(batch, measured ``column``)] for CUDA-graph runs with BS ≤ 512."""
    folder = folder or data_dir() / "fig09"
    out = {}
    for model, name in FIG09_FILES.items():
        with open(folder / name, newline="") as fh:
            rows = [r for r in csv.DictReader(fh) if r["Eager_Mode"].strip() == "False"]
        out[model] = [
            (int(r["BS"]), float(r[column])) for r in rows if int(r["BS"]) <= FIG09_MAX_BS
        ]
    return out


def _fig09_setup(model_name: str, batch: int, chip=None):  # noqa: ANN202
    from deepstack import load_noc_profile

    from plena_opt.chip import load_chip
    from plena_opt.estimate import Plan, Workload
    from plena_opt.estimate.gpu import gpu_memory
    from plena_opt.models import load_model

    chip = chip or load_chip("b200")
    model = load_model(model_name)
    wl = Workload(
        batch_size=batch,
        input_seq_len=1024,
        output_seq_len=1024,
        precision=CHECKPOINT_PRECISION.get(model_name, "bf16"),
        routing=FIG09_MOE_ROUTING if model.num_experts else "balanced",
    )
    noc = load_noc_profile("hgx-b200x8")
    return model, noc, gpu_memory(chip), wl, chip, Plan(tp=8, moe_tp_mode="keep")


def fig09_predict(model_name: str, batch: int, chip=None) -> float:
    """Predicted system decode TPS of one fig09 point."""
    from plena_opt.estimate import Evaluator

    model, noc, memory, wl, chip, plan = _fig09_setup(model_name, batch, chip)
    return Evaluator(model, noc, memory, wl, chip).evaluate(plan).tps


def fig09_prefill_predict(model_name: str, batches: list[int], chip=None) -> dict[int, BurstTtft]:
    """First-token times per batch: a burst of ``batch`` 1,024-token prompts through vLLM's
    chunked-prefill scheduler (default 8,192-token step budget)."""
    from plena_opt.estimate.gpu_queue import (
        VLLM_MAX_NUM_BATCHED_TOKENS,
        EvaluatorStepCosts,
        burst_ttft,
    )

    model, noc, memory, wl, chip, plan = _fig09_setup(model_name, 1, chip)
    costs = EvaluatorStepCosts(model, noc, memory, chip, wl, plan)
    out = {}
    for b in batches:
        q = burst_ttft(b, wl.input_seq_len, VLLM_MAX_NUM_BATCHED_TOKENS, costs.prefill_seconds,
                       costs.decode_seconds, wl.output_seq_len,
                       costs.decode_mean_seconds)  # fmt: skip
        out[b] = q
    return out


def run_scorecard(models: list[str] | None = None) -> Scorecard:
    """Price every shipped measurement (``models`` restricts fig09 to some models)."""
    from plena_opt.errors import PlenaNotFoundError
    from plena_opt.models import list_models

    card = Scorecard()
    known = set(list_models())
    user_decode = fig09_measurements(column="User Decode Speed")
    for model, points in fig09_measurements().items():
        if models is not None and model not in models:
            continue
        if model not in known:
            card.skipped[f"fig09/{model}"] = "model not in the catalog"
            continue
        try:
            for bs, tps in points:
                card.points.append(Point("fig09", model, bs, tps, fig09_predict(model, bs)))
        except PlenaNotFoundError as exc:
            card.skipped[f"fig09/{model}"] = str(exc)
    system = fig09_measurements(column="System Prefill TPS")
    user = fig09_measurements(column="User Prefill Speed")
    for model, points in system.items():
        if (models is not None and model not in models) or model not in known:
            continue
        pred = fig09_prefill_predict(model, [bs for bs, _ in points])
        for bs, v in points:
            card.points.append(Point("fig09_prefill", model, bs, v, pred[bs].system_prefill_tps))
        for bs, v in user[model]:
            card.points.append(Point("fig09_ttft", model, bs, v, pred[bs].user_prefill_speed))
        for bs, v in user_decode[model]:
            tpot = 1.0 / pred[bs].user_decode_speed
            card.points.append(Point("fig09_tpot", model, bs, 1.0 / v, tpot))
    if models is None:
        from plena_opt.validate.fig08 import fig08_points

        card.points.extend(fig08_points())
    return card
