"""Inference serving windows under PP (pipeline-simulator §1.4) and the evaluator adapter.

A window holds ``m`` micro-batches: every micro-batch is prefilled through the ``p`` stages
(optionally in ``k`` chunks), then ``T`` decode steps of the rotating micro-batches follow. The
pipeline hop of a stage (``X``, the evaluator's ``transfer_seconds``) is an explicit ``COMM`` op in
the sending rank's order: PLENA does not overlap it with compute, which is what the analytic
``period = max_stage + X`` assumes (analytic-model §4.6). The last stage's decode send is the
token feedback to stage 0; after the last prefill stage no hop is charged (the analytic
``TTFT = prefill.latency + first_decode.latency`` has none).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plena_opt.errors import PlenaInputError
from plena_opt.simulator.scheduler.ops import OpKind, PipelinePlan, PlanBuilder, check_positive_int


@dataclass(frozen=True)
class InferenceStageTimes:
    """Per-stage times of one plan, in seconds.

    ``*_stage_seconds[s]`` is stage ``s``'s time for one micro-batch (compute + its collectives);
    ``*_transfer_seconds`` the pipeline hop per boundary; ``tokens_per_micro_batch`` the tokens one
    decode step of a micro-batch emits (the evaluator's ``micro_batch``).
    ``decode_stage_seconds`` are the first decode step's (they set TTFT); the later steps take
    ``steady_decode_stage_seconds`` when given (e.g. the average over a decode whose KV cache
    grows), else the same.
    """

    prefill_stage_seconds: tuple[float, ...]
    prefill_transfer_seconds: float
    decode_stage_seconds: tuple[float, ...]
    decode_transfer_seconds: float
    micro_batches: int
    decode_steps: int
    tokens_per_micro_batch: int
    steady_decode_stage_seconds: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        p = len(self.prefill_stage_seconds)
        if p < 1:
            raise PlenaInputError("prefill_stage_seconds", "needs at least one stage")
        if len(self.decode_stage_seconds) != p:
            raise PlenaInputError(
                "decode_stage_seconds", "must have as many stages as prefill_stage_seconds"
            )
        steady = self.steady_decode_stage_seconds
        if steady is not None and len(steady) != p:
            raise PlenaInputError(
                "steady_decode_stage_seconds", "must have as many stages as prefill_stage_seconds"
            )
        for name in (
            "prefill_stage_seconds",
            "decode_stage_seconds",
            "steady_decode_stage_seconds",
        ):
            for s, v in enumerate(getattr(self, name) or ()):
                if not math.isfinite(v) or v < 0:
                    raise PlenaInputError(f"{name}[{s}]", f"{name}[{s}] must be finite and >= 0")
        for name in ("prefill_transfer_seconds", "decode_transfer_seconds"):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0:
                raise PlenaInputError(name, f"{name} must be finite and >= 0")
        check_positive_int("micro_batches", self.micro_batches)
        check_positive_int("decode_steps", self.decode_steps)
        check_positive_int("tokens_per_micro_batch", self.tokens_per_micro_batch)

    @property
    def pp(self) -> int:
        return len(self.prefill_stage_seconds)

    @property
    def steady_decode(self) -> tuple[float, ...]:
        """Stage times of the decode steps after the first (seconds)."""
        return self.steady_decode_stage_seconds or self.decode_stage_seconds

    def analytic(self) -> dict[str, float]:
        """Closed forms for these stage times (seconds, tokens/s; analytic-model §4.6 with the
        token-feedback bound of pipeline-simulator §1.4).

        ``stage_period_seconds = max_stage + X`` (the slowest stage, §4.6); ``loop_period_seconds
        = (Σ stages + p·X) / m``: a micro-batch's next token enters stage 0 only after its last
        one left stage p−1 (and its hop), so ``m`` micro-batches emit at most ``m`` tokens per
        loop. The steady ``decode_period_seconds`` (between successive micro-batch tokens) is
        the larger of the two; the loop binds when ``m < p`` (few micro-batches, e.g. a batch
        smaller than pp), where §4.6's ``micro / (max + X)`` over-states the TPS by up to
        ``p / m``.
        """
        p, m, x = self.pp, self.micro_batches, self.decode_transfer_seconds
        pf, dc = self.prefill_stage_seconds, self.decode_stage_seconds
        stage = max(self.steady_decode) + x
        loop = (sum(self.steady_decode) + p * x) / m
        period = max(stage, loop)
        return {
            "ttft_seconds": sum(pf)
            + (p - 1) * self.prefill_transfer_seconds
            + sum(dc)
            + (p - 1) * x,
            "stage_period_seconds": stage,
            "loop_period_seconds": loop,
            "decode_period_seconds": period,
            "tps": self.tokens_per_micro_batch / period if period > 0 else math.inf,
        }

    def durations(self, prefill_chunks: int = 1) -> dict[str, float]:
        """Duration inputs keyed by op type (``P_s{r}``, ``D0_s{r}`` for the first decode step,
        ``D_s{r}`` for later ones, ``XP``, ``XD``), seconds.

        With ``k`` prefill chunks a chunk takes ``1/k`` of the stage time and of the hop
        (approximation: the hop's fixed latency is not split).
        """
        k = prefill_chunks
        out = {f"P_s{s}": v / k for s, v in enumerate(self.prefill_stage_seconds)}
        out.update({f"D0_s{s}": v for s, v in enumerate(self.decode_stage_seconds)})
        out.update({f"D_s{s}": v for s, v in enumerate(self.steady_decode)})
        out["XP"] = self.prefill_transfer_seconds / k
        out["XD"] = self.decode_transfer_seconds
        return out


def serving_window(
    times: InferenceStageTimes,
    micro_batches: int | None = None,
    decode_steps: int | None = None,
    prefill: bool = True,
    prefill_chunks: int = 1,
) -> PipelinePlan:
    """Plan of one serving window: per rank, prefills (and their sends) of micro-batches
    ``0..m−1``, then decode steps ``t`` of micro-batches ``0..m−1`` with their sends.

    Zero-time hops are left out of the plan (nothing to draw or wait for).
    """
    m = times.micro_batches if micro_batches is None else micro_batches
    steps = times.decode_steps if decode_steps is None else decode_steps
    check_positive_int("micro_batches", m)
    check_positive_int("decode_steps", steps)
    check_positive_int("prefill_chunks", prefill_chunks)
    p = times.pp
    b = PlanBuilder(p)
    for s in range(p):
        if prefill:
            for mb in range(m):
                for j in range(prefill_chunks):
                    b.add(s, OpKind.P, mb, chunk=j, op_type=f"P_s{s}", code="P")
                    if s < p - 1 and times.prefill_transfer_seconds > 0:
                        b.add(s, OpKind.COMM, mb, chunk=j, op_type="XP", code="XP")
        for t in range(steps):
            for mb in range(m):
                kind = "D0" if t == 0 else "D"
                b.add(s, OpKind.D, mb, step=t, op_type=f"{kind}_s{s}", code="D")
                last_send = s == p - 1 and t == steps - 1
                if times.decode_transfer_seconds > 0 and not last_send:
                    b.add(s, OpKind.COMM, mb, step=t, op_type="XD", code="XD")
    name = "serving-window" if prefill else "decode-window"
    meta = {"prefill_chunks": str(prefill_chunks), "decode_steps": str(steps)}
    return b.build(name, p, 1, m, meta)


def _get(doc: Mapping[str, Any], key: str) -> Any:
    """A field of the estimate document (a missing one is an input error naming it)."""
    if not isinstance(doc, Mapping) or key not in doc:
        raise PlenaInputError(key, f"estimate is missing field {key!r}")
    return doc[key]


def _stage_seconds(stages: Sequence[Any], field: str) -> tuple[float, ...]:
    return tuple(float(_get(st, "seconds")) for st in stages) or _fail(field)


def _fail(field: str) -> tuple[float, ...]:
    raise PlenaInputError(field, f"{field} has no stages")


def stage_times_from_estimate(
    est: Mapping[str, Any] | Any, max_decode_steps: int | None = None
) -> InferenceStageTimes:
    """Read a ``DistributedEstimate.to_dict()`` dict (or the object itself) into stage times.

    Uses ``prefill`` and ``first_token_decode`` (stages' ``seconds`` and ``transfer_seconds``);
    ``micro_batches = ceil(batch_size / micro_batch)`` (= pp in the evaluator), ``decode_steps =
    output_seq_len`` (capped at ``max_decode_steps``). The first decode step takes the first
    step's stage times (so TTFT is exact); later steps take them scaled so that the steady period
    equals the estimate's mean decode period ``decode_seconds / output_seq_len`` — the KV cache
    grows over the decode, and the scaling keeps the stages' proportions (exact for one stage or
    equal stages).
    """
    if not isinstance(est, Mapping) and hasattr(est, "to_dict"):
        est = est.to_dict()
    pre, dec = _get(est, "prefill"), _get(est, "first_token_decode")
    micro = int(_get(est, "micro_batch"))
    batch = int(_get(est, "batch_size"))
    steps = int(_get(est, "output_seq_len"))
    if max_decode_steps is not None:
        check_positive_int("max_decode_steps", max_decode_steps)  # 0 would silently become 1
        steps = min(steps, max_decode_steps)
    first = _stage_seconds(_get(dec, "stages"), "first_token_decode.stages")
    transfer = float(_get(dec, "transfer_seconds"))
    steady = None
    total = est.get("decode_seconds") if isinstance(est, Mapping) else None
    out_len = int(_get(est, "output_seq_len"))
    in_flight = max(1, -(-batch // max(micro, 1)))
    if total is not None and out_len > 1 and max(first) > 0:
        # the steady period P = max(s·max + X, (s·Σ + p·X) / m) of the stages scaled by s
        # (the second bound when fewer micro-batches than stages: docs/deviations.md §5);
        # both sides grow with s, so P is met at the smaller of the two solutions
        period = float(total) / out_len
        scale = (period - transfer) / max(first)
        if in_flight < len(first):
            loop = (period * in_flight - len(first) * transfer) / sum(first)
            scale = min(scale, loop)
        steady = tuple(v * scale for v in first)
    return InferenceStageTimes(
        prefill_stage_seconds=_stage_seconds(_get(pre, "stages"), "prefill.stages"),
        prefill_transfer_seconds=float(_get(pre, "transfer_seconds")),
        decode_stage_seconds=first,
        decode_transfer_seconds=transfer,
        micro_batches=in_flight,
        decode_steps=max(steps, 1),
        tokens_per_micro_batch=max(micro, 1),
        steady_decode_stage_seconds=steady,
    )
