"""PLENA chips in the evaluator: ISA cycles priced on a stage roofline (the ``kind: plena`` path).

A layer is its ``PerfModel`` cycle count (analytic-model §1, ``estimate.layer``) at the compute
clock (workload frequency × the memory's clock scale) against its DRAM traffic, overlapped as
the workload's ``overlap_policy`` says (§3.3); the embedding and LM head are stages of their own
(§4.4). Energy: DRAM and NoC per bit, plus the profile's ``power`` over the compute seconds.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import numpy as np

from plena_opt.chip import PerfModel
from plena_opt.chip.precision import PLENA_BYTES
from plena_opt.estimate.layer import LayerKind, LayerShape, layer_cycles, layer_traffic
from plena_opt.estimate.moe_load import MoeLoad
from plena_opt.estimate.plan import Workload
from plena_opt.estimate.pricer import LayerPricer, register_pricer
from plena_opt.estimate.pricing import StageArrays, StepWeights, price_arrays
from plena_opt.memory import HbmStoragePrecision, Memory

if TYPE_CHECKING:
    from plena_opt.estimate.distributed import PlanCost
    from plena_opt.models import ModelSpec


@register_pricer
class PlenaPricer(LayerPricer):
    """ISA-cycle pricing of layers and extras on one PLENA chip."""

    kind = "plena"
    shares_layers_across_batches = True

    @classmethod
    def storage_precision(cls, chip: Any, workload: Workload) -> HbmStoragePrecision | None:
        """The PLENA formats' bytes (``chip.precision.PLENA_BYTES``); None: the default."""
        p, kv = workload.precision, workload.kv_precision
        if p is None and kv is None:
            return None
        base = PLENA_BYTES[p or "mxfp8"]
        kvb = PLENA_BYTES[kv or p or "mxfp8"].activation
        return HbmStoragePrecision(base.weight, kvb, kvb, base.activation)

    def __init__(self, chip: Any, precision: HbmStoragePrecision, workload: Workload,
                 memory: Memory, model: ModelSpec | None = None) -> None:  # fmt: skip
        self.chip = chip
        self.precision = precision
        self.memory = memory
        self.model = model
        self.policy = workload.overlap_policy
        self.compute_hz = workload.frequency_hz * memory.compute_frequency_scale  # Hz
        self.include_lm_head = workload.include_lm_head
        self.perf_model = PerfModel(chip)
        self.decode_tile = self.perf_model.MLEN

    def layer(self, s: LayerShape, kind: LayerKind, mode: str, q: int, kv: np.ndarray,
              load: MoeLoad | None, steps: StepWeights, cp: int) -> StageArrays:  # fmt: skip
        """ISA cycles and DRAM traffic of one layer, on the stage roofline (§3.3)."""
        cyc = layer_cycles(s, kind, mode, q, kv, load)
        reads, writes = layer_traffic(s, kind, mode, q, kv, cp, load)
        return price_arrays(cyc, reads, writes, self.memory, self.compute_hz, self.policy, steps)

    def extras(self, s: LayerShape, mode: str, q: int, steps: StepWeights, last_stage: int,
               cache: dict, key: Hashable) -> dict[int, list[StageArrays]]:  # fmt: skip
        """Embedding (prefill, first stage) and LM head (last stage) as separate stages; the
        priced pair is kept in ``cache`` under ``key`` for plans of another depth."""
        pair = cache.get(key)
        if pair is None:
            pair = cache[key] = self._price_extras(s, mode, q, steps)
        emb, lm = pair
        out: dict[int, list[StageArrays]] = {}
        if emb is not None:
            out.setdefault(0, []).append(emb)
        if lm is not None:
            out.setdefault(last_stage, []).append(lm)
        return out

    def lm_head_phases(self, model: ModelSpec) -> tuple[bool, bool]:
        """(prefill, decode): whether the LM head is priced in each phase (§4.4)."""
        inc = self.include_lm_head
        return (inc or model.family == "moe", inc)

    def _price_extras(
        self, s: LayerShape, mode: str, q: int, steps: StepWeights
    ) -> tuple[StageArrays | None, StageArrays | None]:
        """(embedding, LM head) of one device, each None where the phase does not price it."""
        d, prec, perf = s.shard, self.precision, self.perf_model
        h = s.model.hidden_size
        price = lambda cyc, reads: price_arrays(  # noqa: E731
            cyc, reads, {}, self.memory, self.compute_hz, self.policy, steps
        )
        emb = lm = None
        if mode == "prefill":
            emb = price(
                perf.embeddings(h, q, d.b_dev, "prefill"),
                {"embedding_rows": d.b_dev * q * h * prec.activation_bytes},
            )
        lm_prefill, lm_decode = self.lm_head_phases(s.model)
        if (mode == "prefill" and lm_prefill) or (mode == "decode" and lm_decode):
            lm = price(
                perf.lm_head(h, d.vocab, d.b_dev),
                {"lm_head_weights": d.vocab * h * prec.weight_bytes},
            )
        return emb, lm

    def chip_warnings(self, model: ModelSpec) -> list[str]:
        """PerfModel's projections assume hidden-wide Q/O (a warning where they are not)."""
        m = model
        width = m.head_dim * m.num_heads
        if width == m.hidden_size or m.is_mla:
            return []
        return [
            f"head_dim * num_attention_heads ({width}) differs from hidden_size "
            f"({m.hidden_size}); weight traffic uses the true projection shapes, PerfModel's "
            "projection cycles assume hidden-wide Q/O"
        ]

    def power_report(self) -> dict | None:
        """The profile's compute ``power`` (W), where it gives one (issue 30)."""
        return None if self.chip.power is None else self.chip.power.model_dump()

    def energy_per_token(self, cost: PlanCost, base: float | None) -> float | None:
        """DRAM + NoC energy (``base``), plus the compute power where the profile gives one."""
        if self.chip.power is not None and base is not None:
            return base + plena_compute_energy_per_token(cost)
        return base


def plena_compute_energy_per_token(cost: PlanCost) -> float:
    """Joules per generated token of a PLENA chip's compute (its profile's ``power``): every
    device draws ``busy_watts`` over its stage's compute seconds and ``idle_watts`` for the rest
    of the decode (DRAM and NoC energy are priced apart, per bit)."""
    pw, plan = cost.ctx.chip.power, cost.plan
    busy_dev = cost.decode.total("compute_seconds") * plan.world_size / plan.pp
    idle_dev = max(cost.decode_seconds * plan.world_size - busy_dev, 0.0)
    joules = busy_dev * pw.busy_watts + idle_dev * pw.idle_watts
    return joules / (cost.shard.micro * cost.ctx.workload.output_seq_len)
