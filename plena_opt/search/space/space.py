"""The plan search space: (plan, batch size) points whose tp·ep·dp·pp·cp equals the device count.

Legality is decided by the evaluator (``Evaluator.check``, analytic-model §4.2), so a plan is never
priced as if legal. For Optuna the independent choices are ``tp``, ``ep``, ``pp``, ``cp`` (the
values that occur in legal plans), ``moe_tp_mode`` and ``moe_tp`` (MoE models only: the experts'
split over the tp·ep devices of an expert group, 0 for the shorthand), ``comm_overlap`` and, with a
batch list, ``batch_size`` and, with ``--precisions``, ``precision`` (the storage format of
weights and activations, ``plena_opt.chip.precision.FORMATS``); ``dp`` is derived as the device
count divided by the others, and a suggestion whose derived plan is not legal is recorded as
pruned with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution

from plena_opt.estimate.plan import Plan, divisors, factorisations
from plena_opt.vocabulary import COMM_OVERLAPS, MOE_TP_MODES

SEARCH_DIMS = ("tp", "ep", "pp", "cp")
__all__ = ["SEARCH_DIMS", "PlanSpace", "Point", "divisors", "factorisations"]


@dataclass(frozen=True, order=True)
class Point:
    """One point of the search space: a plan served at a global batch size (sequences), in
    ``precision`` when the search searches formats (None: the problem's precision)."""

    plan: Plan
    batch_size: int
    precision: str | None = None

    @property
    def key(self) -> str:
        """Stable text key, e.g. ``tp8-ep1-dp1-pp4-cp1-replace-none-b16`` (cache and trial attr)."""
        p = self.plan
        mode = f"mtp{p.moe_tp}" if p.moe_tp else p.moe_tp_mode
        return (
            f"tp{p.tp}-ep{p.ep}-dp{p.dp}-pp{p.pp}-cp{p.cp}-{mode}-{p.comm_overlap}"
            f"-b{self.batch_size}" + (f"-{self.precision}" if self.precision else "")
        )

    def to_dict(self) -> dict[str, Any]:
        p = self.plan
        d: dict[str, Any] = {
            "tp": p.tp,
            "ep": p.ep,
            "dp": p.dp,
            "pp": p.pp,
            "cp": p.cp,
            "moe_tp_mode": p.moe_tp_mode,
            "comm_overlap": p.comm_overlap,
            "batch_size": self.batch_size,
        }
        if p.moe_tp:  # an explicit MoE split (absent for the shorthands)
            d["moe_tp"] = p.moe_tp
        if self.precision is not None:
            d["precision"] = self.precision
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Point:
        prec = d.get("precision")
        return cls(Plan.from_dict(d), int(d["batch_size"]), None if prec is None else str(prec))

    def label(self) -> str:
        text = f"{self.plan.label()} b{self.batch_size}"
        return f"{text} {self.precision}" if self.precision else text


class PlanSpace:
    """Legal points for ``num_devices`` devices and the batch sizes in ``batch_sizes``.

    ``check(plan)`` raises (``PlenaInputError``) for an illegal plan; it is called once per
    (tp, ep, dp, pp, cp, moe_tp_mode) — legality does not depend on ``comm_overlap`` or the batch
    size (analytic-model §4.2 lists no rule on either beyond their allowed values).
    """

    def __init__(
        self,
        num_devices: int,
        batch_sizes: Sequence[int],
        check: Any,
        precisions: Sequence[str] | None = None,
    ) -> None:
        """``precisions``: the searched formats (None: the problem's one precision, not a param;
        legality does not depend on the format)."""
        self.num_devices = num_devices
        self.batch_sizes = tuple(batch_sizes)
        self.precisions: tuple[str | None, ...] = tuple(precisions) if precisions else (None,)
        self.illegal: dict[tuple, str] = {}
        legal_shapes: list[Plan] = []
        for tp, ep, dp, pp, cp in factorisations(num_devices):
            for mode in MOE_TP_MODES:
                plan = Plan(tp=tp, ep=ep, dp=dp, pp=pp, cp=cp, moe_tp_mode=mode)
                try:
                    check(plan)
                except ValueError as exc:
                    self.illegal[(tp, ep, dp, pp, cp, mode)] = str(exc)
                    continue
                legal_shapes.append(plan)
        # A dense model cannot use ep > 1 (§4.2 "use dp"), so EP legality marks an MoE model;
        # for dense models (and one device) the MoE TP mode changes nothing and is not searched.
        self.is_moe = any(p.ep > 1 for p in legal_shapes)
        # ``keep`` differs from ``replace`` only when tp > 1 (with tp = 1 both give tp'=1, ep'=ep).
        shapes = [
            p for p in legal_shapes if p.moe_tp_mode == "replace" or (self.is_moe and p.tp > 1)
        ]
        if self.is_moe:
            shapes += self._splits([p for p in legal_shapes if p.moe_tp_mode == "replace"], check)
        self.moe_tps = sorted({p.moe_tp for p in shapes if p.moe_tp})
        self.points: list[Point] = [
            Point(Plan(p.tp, p.ep, p.dp, p.pp, p.cp, p.moe_tp_mode, ov, p.moe_tp), b, prec)
            for prec in self.precisions
            for b in self.batch_sizes
            for p in shapes
            for ov in COMM_OVERLAPS
        ]
        self._legal = set(self.points)
        self.choices: dict[str, list[Any]] = {
            d: sorted({getattr(p, d) for p in shapes}) or [1] for d in SEARCH_DIMS
        }

    def _splits(self, shapes: list[Plan], check: Any) -> list[Plan]:
        """The legal explicit MoE splits of ``shapes``: every ``moe_tp`` dividing tp·ep but 1 and
        tp (those are the ``replace`` and ``keep`` shorthands, priced alike)."""
        out = []
        for p in shapes:
            for mt in divisors(p.tp * p.ep):
                if mt in (1, p.tp):
                    continue
                plan = Plan(p.tp, p.ep, p.dp, p.pp, p.cp, moe_tp=mt)
                try:
                    check(plan)
                except ValueError as exc:
                    self.illegal[(p.tp, p.ep, p.dp, p.pp, p.cp, f"moe_tp={mt}")] = str(exc)
                    continue
                out.append(plan)
        return out

    def __len__(self) -> int:
        return len(self.points)

    def __contains__(self, point: object) -> bool:
        return point in self._legal

    def distributions(self) -> dict[str, BaseDistribution]:
        """Optuna distributions of the independent choices (fixed for the whole study)."""
        dists: dict[str, BaseDistribution] = {
            d: CategoricalDistribution(self.choices[d]) for d in SEARCH_DIMS
        }
        if self.is_moe:
            dists["moe_tp_mode"] = CategoricalDistribution(list(MOE_TP_MODES))
        if self.moe_tps:
            dists["moe_tp"] = CategoricalDistribution([0, *self.moe_tps])
        dists["comm_overlap"] = CategoricalDistribution(list(COMM_OVERLAPS))
        if len(self.batch_sizes) > 1:
            dists["batch_size"] = CategoricalDistribution(list(self.batch_sizes))
        if self.searches_precision:
            dists["precision"] = CategoricalDistribution(list(self.precisions))
        return dists

    @property
    def searches_precision(self) -> bool:
        """Whether the precision is a searched choice (``--precisions``)."""
        return self.precisions[0] is not None

    def params(self, point: Point) -> dict[str, Any]:
        """The Optuna params of a legal ``point`` (``dp`` is derived, so not a param)."""
        d = {"moe_tp": 0, **point.to_dict()}
        return {name: d[name] for name in self.distributions()}

    def point_from_params(self, params: dict[str, Any]) -> tuple[Point | None, str | None]:
        """The point the params describe, or ``(None, reason)`` when it is not legal."""
        tp, ep, pp, cp = (int(params[d]) for d in SEARCH_DIMS)
        mode = str(params.get("moe_tp_mode", "replace")) if tp > 1 else "replace"
        overlap = str(params["comm_overlap"])
        batch = int(params.get("batch_size", self.batch_sizes[0]))
        prec = params.get("precision", self.precisions[0])
        rest = tp * ep * pp * cp
        if self.num_devices % rest:
            return None, (f"tp·ep·pp·cp = {rest} does not divide the {self.num_devices} devices")
        dp = self.num_devices // rest
        mt = int(params.get("moe_tp", 0))
        if mt and (tp * ep) % mt:
            return None, f"moe_tp={mt} does not divide the tp*ep={tp * ep} devices of a group"
        if mt in (1, tp):  # the shorthands' splits: the canonical plan
            mode, mt = ("keep" if tp > 1 else "replace") if mt == tp else "replace", 0
        mode = "replace" if mt else mode
        point = Point(Plan(tp, ep, dp, pp, cp, mode, overlap, mt), batch, prec)
        if point in self._legal:
            return point, None
        where = f"moe_tp={mt}" if mt else mode
        reason = self.illegal.get((tp, ep, dp, pp, cp, where), "not in the legal plan space")
        return None, reason
