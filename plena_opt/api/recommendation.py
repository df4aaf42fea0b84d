"""Use case: the one recommendation that ends a search (issue 25).

``recommend(result, request)`` picks one deployment from a finished search whose serving
decisions are in (``decide_serving``):

1. with a serving comparison that finished (``--serving both|disaggregated``), the mode the
   verdict favours (higher goodput under load; a mode without a deployment loses) and that
   mode's best-goodput deployment, with the figures under load;
2. otherwise the search front: with an SLA, the plan of the best goodput (tokens/s/device among
   plans meeting it; after a re-check, the best that still meets it at the asked percentile of
   the Monte Carlo re-check); without one, the best plan on the first throughput objective the
   user asked for (else on the first objective).

The result carries the plan key(s) ``plena-opt export`` takes, the figures it was chosen on and
what they are (``basis``), and why it was chosen. None when nothing can be recommended
(``empty_reason`` of the search and of the comparison say why).
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from typing import Any

from plena_opt.search.result import FrontEntry, SearchResult
from plena_opt.search.serving.serving import BASIS_MONTE_CARLO
from plena_opt.search.serving.serving import BASIS_STATIC as STATIC
from plena_opt.search.serving.serving import BASIS_UNDER_LOAD as UNDER_LOAD
from plena_opt.search.space.space import Point

THROUGHPUT = ("tps", "tps-per-device", "tps-per-user", "tps-per-seq")
_ENTRY_FIGURE = {  # objective key -> (FrontEntry attribute, larger is better)
    "tps": ("tps", True),
    "tps-per-device": ("tps_per_device", True),
    "tps-per-user": ("tps_per_sequence", True),
    "tps-per-seq": ("tps_per_sequence", True),
    "ttft": ("ttft_ms", False),
    "energy": ("energy_j_per_token", False),
    "cost-per-mtok": ("usd_per_million_output_tokens", False),
}


@dataclass(frozen=True)
class Recommendation:
    """One deployment to run: ``kind`` aggregated | disaggregated; ``key`` the plan key
    ``plena-opt export`` takes (disaggregated: the prefill pool's, ``decode_key`` the decode
    pool's); figures in SI (seconds, tokens/s) on ``basis``; ``reason`` why it was chosen."""

    kind: str
    key: str
    label: str
    basis: str
    tps_per_device: float | None
    ttft_seconds: float | None
    tpot_seconds: float | None
    devices: int | None
    reason: str
    decode_key: str | None = None
    prefill_workers: int | None = None
    decode_workers: int | None = None
    input_seq: int | None = None
    output_seq: int | None = None
    plan: dict[str, Any] | None = None  # aggregated: the plan (``Point.to_dict``), else None
    model_args: tuple[str, ...] = ()  # ``--model NAME`` or ``--model-path DIR`` the export loads
    memory_fraction: float | None = None  # the search's --memory-fraction (None: export's 0.9)

    def export_command(self) -> str:
        """The ``plena-opt export`` line that writes its launch arguments."""
        key = self.key
        if self.decode_key is not None:  # the deployment key, with its worker counts
            pw, dw = self.prefill_workers or 1, self.decode_workers or 1
            key = f"{pw}P:{self.key}+{dw}D:{self.decode_key}"
        cmd = ["plena-opt", "export", key, *self.model_args]
        if self.input_seq is not None and self.output_seq is not None:
            cmd += ["--input-seq", str(self.input_seq), "--output-seq", str(self.output_seq)]
        if self.memory_fraction is not None:  # the engines start with the memory it was judged at
            cmd += ["--memory-fraction", f"{self.memory_fraction:g}"]
        return shlex.join(cmd)

    def to_dict(self) -> dict[str, Any]:
        """The ``recommendation`` of ``search --json`` (SI)."""
        return {
            "kind": self.kind,
            "key": self.key,
            "decode_key": self.decode_key,
            "label": self.label,
            "plan": self.plan,
            "figures": {
                "basis": self.basis,
                "tps_per_device": self.tps_per_device,
                "ttft_seconds": self.ttft_seconds,
                "tpot_seconds": self.tpot_seconds,
                "devices": self.devices,
                "prefill_workers": self.prefill_workers,
                "decode_workers": self.decode_workers,
            },
            "reason": self.reason,
            "export_command": self.export_command(),
        }

    def to_text(self) -> str:
        """Lines for the end of ``plena-opt search``."""
        figs = [f"{self.tps_per_device:.2f} tokens/s/device"] if self.tps_per_device else []
        if self.ttft_seconds is not None:
            figs.append(f"TTFT {self.ttft_seconds * 1e3:.2f} ms")
        if self.tpot_seconds is not None:
            figs.append(f"TPOT {self.tpot_seconds * 1e3:.3f} ms")
        return "\n".join(
            [
                f"recommendation ({self.kind}): {self.label}",
                f"  {', '.join(figs)} ({self.basis})" if figs else f"  ({self.basis})",
                f"  why: {self.reason}",
                f"  export it:    {self.export_command()}",
            ]
        )


def _key(plan: dict[str, Any]) -> str:
    return Point.from_dict({k: v for k, v in plan.items() if k != "workers"}).key


def recommend(result: SearchResult, request: Any) -> Recommendation | None:
    """The recommendation of a finished search (module docstring)."""
    cmp = result.serving.get("comparison") or {}
    seqs = {
        "input_seq": request.problem.input_seq,
        "output_seq": request.problem.output_seq,
        "model_args": _model_args(request.problem),
        "memory_fraction": getattr(request, "memory_fraction", None),
    }
    if cmp and not cmp.get("partial"):
        mode, why = _favoured(cmp)
        if mode is not None:
            return _from_deployment(cmp[mode]["front"][0], why, seqs)
        if "disaggregated" in cmp and "aggregated" not in cmp:
            reason = cmp["disaggregated"].get("empty_reason") or "none scored"
            rec = _from_front(result, request, seqs)
            if rec is None:
                return None
            note = f"no disaggregated deployment ({reason}); the aggregated plan: "
            return _with_reason(rec, note + rec.reason)
    return _from_front(result, request, seqs)


def _model_args(problem: Any) -> tuple[str, ...]:
    """The flags that name the searched model to ``plena-opt export`` (its real model id)."""
    if getattr(problem, "model_path", None):
        return ("--model-path", str(problem.model_path))
    if getattr(problem, "model", None):
        return ("--model", str(problem.model))
    return ()


def _favoured(cmp: dict[str, Any]) -> tuple[str | None, str]:
    """The mode the comparison favours (None: neither has a deployment) and why."""
    have = [m for m in ("aggregated", "disaggregated") if m in cmp and cmp[m]["front"]]
    if not have:
        return None, ""
    if len(have) == 1:
        other = "disaggregated" if have[0] == "aggregated" else "aggregated"
        if other in cmp:
            return have[0], cmp.get("verdict") or f"{have[0]} wins: only it has deployments"
        return have[0], f"best goodput of the {have[0]} deployments (--serving {have[0]})"
    ga = cmp["aggregated"]["goodput_tps_per_device"]
    gd = cmp["disaggregated"]["goodput_tps_per_device"]
    from plena_opt.search.serving.serving_compare import TIE_RTOL

    tie = math.isclose(ga, gd, rel_tol=TIE_RTOL)
    mode = "disaggregated" if gd > ga and not tie else "aggregated"  # a tie: the simpler one
    return mode, cmp.get("verdict") or f"{mode} has the higher goodput"


def _from_deployment(e: dict[str, Any], why: str, seqs: dict) -> Recommendation:
    dis = e.get("serving") == "disaggregated"
    return Recommendation(
        kind="disaggregated" if dis else "aggregated",
        key=_key(e["prefill"] if dis else e["plan"]),
        decode_key=_key(e["decode"]) if dis else None,
        label=e["label"],
        basis=UNDER_LOAD,
        tps_per_device=e["tps_per_device"],
        ttft_seconds=e["ttft_seconds"],
        tpot_seconds=e["tpot_seconds"],
        devices=e.get("devices"),
        prefill_workers=e["prefill"]["workers"] if dis else None,
        decode_workers=e["decode"]["workers"] if dis else None,
        reason=f"the serving verdict: {why}",
        plan=None if dis else e["plan"],
        **seqs,
    )


def _with_reason(rec: Recommendation, reason: str) -> Recommendation:
    from dataclasses import replace

    return replace(rec, reason=reason)


def _from_front(result: SearchResult, request: Any, seqs: dict) -> Recommendation | None:
    """The search front's plan for the user's SLA and objectives (module docstring)."""
    from plena_opt.search.serving.serving import has_sla, sla_dict, sla_text

    if not result.front:
        return None
    serving = result.serving
    sla = sla_text(sla_dict(request))
    plan_label = serving.get("goodput_at_percentile_plan")
    if plan_label is not None:
        pct = serving["percentile"]
        v = next(v for v in serving["verdicts"] if v["label"] == plan_label)
        entry = next(e for e in result.front if e.label == plan_label)
        return _entry_rec(
            entry,
            f"TTFT/TPOT: {BASIS_MONTE_CARLO} at {pct}; tokens/s/device: {STATIC}",
            f"highest tokens/s/device of the plans still meeting the SLA ({sla}) at {pct} of "
            "the Monte Carlo re-check",
            seqs,
            ttft=v["ttft_seconds"],
            tpot=v["tpot_seconds"],
        )
    basis = STATIC
    if result.under_load is not None:  # issue 23: the front's figures are under load
        basis = f"{UNDER_LOAD}, {result.under_load['percentile']}"
    if has_sla(request):
        entry = max(result.front, key=lambda e: e.tps_per_device or 0.0)
        missed = " (none re-checked meets it at the percentile)" if "verdicts" in serving else ""
        why = f"highest tokens/s/device of the front plans meeting the SLA ({sla}){missed}"
        return _entry_rec(entry, basis, why, seqs)
    objectives = list(request.objectives)
    key = next((k for k in objectives if k in THROUGHPUT), objectives[0])
    attr, larger = _ENTRY_FIGURE[key]
    known = [e for e in result.front if getattr(e, attr) is not None] or result.front
    pick = max if larger else min
    entry = pick(known, key=lambda e: getattr(e, attr) or 0.0)
    why = (
        f"{'highest' if larger else 'lowest'} {key} on the Pareto front of "
        f"{', '.join(objectives)} (no SLA given)"
    )
    return _entry_rec(entry, basis, why, seqs)


def _entry_rec(
    e: FrontEntry,
    basis: str,
    reason: str,
    seqs: dict,
    ttft: float | None = None,
    tpot: float | None = None,
) -> Recommendation:
    return Recommendation(
        kind="aggregated",
        key=_key(e.plan),
        label=e.label,
        basis=basis,
        tps_per_device=e.tps_per_device,
        ttft_seconds=e.ttft_ms / 1e3 if ttft is None else ttft,
        tpot_seconds=e.tpot_ms / 1e3 if tpot is None else tpot,
        devices=Point.from_dict(e.plan).plan.world_size,
        reason=reason,
        plan=e.plan,
        **seqs,
    )
