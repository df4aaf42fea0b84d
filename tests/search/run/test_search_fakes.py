"""A tiny deterministic stand-in for ``plena_opt.estimate.Evaluator`` (Optuna-layer unit tests).

Not a model of anything: smooth functions of the plan with real trade-offs (TP lowers TTFT but
costs energy, DP raises throughput but needs memory, PP adds bubbles), and §4.2-style legality.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from plena_opt.errors import PlenaInputError


@dataclass
class FakeMetrics:
    plan: object
    ttft_seconds: float
    tps: float
    tps_per_sequence: float
    energy_per_token_joules: float | None
    weight_bytes_per_device: float
    kv_cache_bytes_per_device: float
    fits_in_memory: bool
    bottleneck: str = "stage 0"
    attribution: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)


class FakeEvaluator:
    """``devices`` devices, ``heads`` heads, ``layers`` layers, ``experts`` (0 = dense)."""

    def __init__(
        self,
        devices=8,
        batch=16,
        heads=8,
        layers=8,
        experts=0,
        capacity=6e9,
        calls=None,
        energy=True,
    ):
        self.noc = SimpleNamespace(num_devices=devices)
        self.memory = SimpleNamespace(capacity_bytes=capacity)
        self.batch, self.heads, self.layers, self.experts = batch, heads, layers, experts
        self.calls = calls if calls is not None else []
        self.energy = energy

    @property
    def num_devices(self) -> int:
        return self.noc.num_devices

    @property
    def memory_capacity_bytes(self) -> float | None:
        return self.memory.capacity_bytes

    def check(self, plan) -> None:
        if plan.world_size != self.noc.num_devices:
            raise PlenaInputError("plan", "world size must equal the device count")
        if self.heads % plan.tp:
            raise PlenaInputError("tp", "tp must divide the attention heads")
        if plan.pp > self.layers:
            raise PlenaInputError("pp", "pp must not exceed the layers")
        if not self.experts and plan.ep > 1:
            raise PlenaInputError("ep", "dense model with ep > 1: use dp")
        if self.experts and plan.cp > 1:
            raise PlenaInputError("cp", "cp needs a dense model")
        if self.experts and self.experts % min(plan.ep * plan.tp, self.experts):
            raise PlenaInputError("ep", "experts must divide over EP ranks")
        if plan.moe_tp and (not self.experts or self.experts % (plan.tp * plan.ep // plan.moe_tp)):
            raise PlenaInputError("moe_tp", "experts must divide over the MoE EP ranks")

    def evaluate_batch(self, plans):
        out = []
        for p in plans:
            self.check(p)
            self.calls.append((p, self.batch))
            comm = 0.02 * (p.tp - 1) + 0.05 * (p.cp - 1) + 0.01 * (p.ep - 1)
            if p.comm_overlap == "full":
                comm *= 0.5
            mode = 1.1 if p.moe_tp_mode == "keep" else 1.0
            ttft = (1.0 / (p.tp * p.cp) + comm + 0.03 * p.pp) * mode * (1 + self.batch / 64)
            step = (0.01 / p.tp + 0.002 * p.pp + comm / 10) * mode * (1 + self.batch / 256)
            micro = max(1, self.batch // (p.dp * p.ep))
            tps = micro * p.dp * p.ep / step
            weights = 16e9 / (p.tp * p.pp * max(1, p.ep // 2))
            kv = 2e7 * self.batch / (p.dp * p.cp * p.pp)
            energy = 0.1 * (1 + 0.2 * (p.tp - 1) + 0.1 * p.pp) / (1 + self.batch / 32)
            out.append(
                FakeMetrics(
                    plan=p,
                    ttft_seconds=ttft,
                    tps=tps,
                    tps_per_sequence=1.0 / (p.pp * step),
                    energy_per_token_joules=energy if self.energy else None,
                    weight_bytes_per_device=weights,
                    kv_cache_bytes_per_device=kv,
                    fits_in_memory=weights + kv <= self.memory.capacity_bytes,
                    attribution={"compute": step},
                )
            )
        return out


def fake_factory(calls=None, **kw):
    calls = [] if calls is None else calls
    return (lambda b: FakeEvaluator(batch=b, calls=calls, **kw)), calls
