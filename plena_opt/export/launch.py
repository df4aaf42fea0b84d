"""A plan as the arguments a team types to launch it (``plena-opt export``).

The flag names live in one data file, ``engines.json``, with the engine version and the
documentation page each mapping was written for. A plan feature an engine cannot express (CP,
``keep`` mode, …) is listed under ``cannot_express`` and no flag is written for it. A plan's
``precision`` (weights and activations) becomes ``--quantization`` and its KV format
``--kv-cache-dtype`` where the engine has a value for it (fp8); bf16 is the checkpoint's own dtype
and writes nothing; any other format is listed under ``cannot_express``.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from importlib import resources
from math import ceil
from typing import Any

from plena_opt.errors import PlenaInputError
from plena_opt.estimate.plan import Plan

ENGINES: dict[str, dict[str, Any]] = json.loads(
    resources.files("plena_opt.export").joinpath("engines.json").read_text()
)
FORMATS = ("vllm", "sglang", "json")
_KEY = re.compile(
    r"^tp(\d+)-ep(\d+)-dp(\d+)-pp(\d+)-cp(\d+)-(replace|keep)-(none|full)-b(\d+)(?:-(\w+))?$"
)


def parse_plan_key(text: str) -> tuple[Plan, int]:
    """``tp8-ep1-dp1-pp4-cp1-replace-none-b16`` (a trial's ``point_key``) → (plan, batch)."""
    plan, batch, _ = parse_point_key(text)
    return plan, batch


def parse_point_key(text: str) -> tuple[Plan, int, str | None]:
    """A trial's ``point_key`` → (plan, batch, precision); the precision suffix (``-fp8``) is
    there when the search searched formats (``--precisions``), else None."""
    m = _KEY.match(text.strip())
    if not m:
        raise PlenaInputError(
            "plan",
            f"plan {text!r} must look like tp8-ep1-dp1-pp4-cp1-replace-none-b16 (the "
            "point_key of a search trial)",
        )
    tp, ep, dp, pp, cp = (int(m.group(i)) for i in range(1, 6))
    prec = m.group(9)
    if prec is not None:
        from plena_opt.chip.precision import FORMATS as PRECISIONS

        if prec not in PRECISIONS:
            raise PlenaInputError(
                "plan", f"plan {text!r}: unknown precision {prec!r}; one of {', '.join(PRECISIONS)}"
            )
    return Plan(tp, ep, dp, pp, cp, m.group(6), m.group(7)), int(m.group(8)), prec


@dataclass(frozen=True)
class LaunchConfig:
    """One engine launch: the argument vector, what it cannot express, and notes."""

    engine: str
    role: str | None
    argv: list[str]
    cannot_express: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "role": self.role,
            "argv": self.argv,
            "command": shlex.join(self.argv),
            "cannot_express": self.cannot_express,
            "notes": self.notes,
        }

    def script(self) -> str:
        """A shell script: the command, then what it leaves out as comments."""
        spec = ENGINES[self.engine]
        lines = ["#!/bin/sh", f"# {spec['written_for']} ({spec['source']})"]
        lines += [f"# NOT EXPRESSED: {c}" for c in self.cannot_express]
        lines += [f"# note: {n}" for n in self.notes]
        lines.append(shlex.join(self.argv))
        return "\n".join(lines) + "\n"


def _missing(engine: str, plan: Plan) -> list[str]:
    bad = ENGINES[engine]["cannot_express"]
    out = []
    if plan.cp > 1:
        out.append(bad["cp"])
    if plan.moe_tp_mode == "keep" and plan.tp > 1:
        out.append(bad["keep"])
    if engine == "vllm" and plan.ep > 1 and plan.dp > 1:
        out.append(bad["ep_with_dp"])
    if engine == "sglang" and plan.ep > 1:
        out.append(bad["ep"])
    return out


def _precision_args(
    engine: str, precision: str | None, kv_precision: str | None
) -> tuple[list[str], list[str]]:
    """(arguments, what cannot be expressed) for the weight and KV formats."""
    spec = ENGINES[engine]["precision"]
    argv: list[str] = []
    missing: list[str] = []
    for fmt, table, flag, other in (
        (precision, "quantization", "quantization_flag", "other_formats"),
        (kv_precision, "kv_cache_dtype", "kv_cache_dtype_flag", "other_kv_formats"),
    ):
        if fmt is None or fmt == "bf16":
            continue
        if fmt in spec[table]:
            argv += [spec[flag], spec[table][fmt]]
        else:
            missing.append(spec[other].format(format=fmt))
    return argv, missing


def export_plan(
    engine: str,
    plan: Plan,
    batch: int,
    *,
    model: str,
    max_len: int,
    memory_fraction: float = 0.9,
    role: str | None = None,
    workers: int | None = None,
    precision: str | None = None,
    kv_precision: str | None = None,
) -> LaunchConfig:
    """The launch of ``plan`` serving ``batch`` sequences of up to ``max_len`` tokens, weights
    and activations in ``precision`` and the KV cache in ``kv_precision`` (None: the engine's
    default, the checkpoint's dtype)."""
    if engine not in ENGINES:
        raise PlenaInputError("format", f"format must be one of {', '.join(FORMATS)}")
    spec, flags = ENGINES[engine], ENGINES[engine]["flags"]
    argv = [a.format(model=model) for a in spec["command"]]
    replicas = plan.dp * plan.ep
    argv += [flags["tp"], str(plan.tp)]
    if plan.pp > 1:
        argv += [flags["pp"], str(plan.pp)]
    if replicas > 1:
        argv += [flags["dp"], str(replicas)]
    if plan.ep > 1 and "expert_parallel" in flags:
        argv.append(flags["expert_parallel"])
    seqs = ceil(batch / replicas) if spec["max_seqs_per"] == "replica" else batch
    argv += [flags["max_seqs"], str(seqs), flags["max_len"], str(max_len)]
    argv += [flags["memory_fraction"], f"{memory_fraction:g}"]
    prec_argv, prec_missing = _precision_args(engine, precision, kv_precision)
    argv += prec_argv
    notes = []
    if plan.comm_overlap == "full":
        notes.append("comm_overlap full is the engine's own scheduling; no argument")
    if role is not None:
        if spec["disaggregation_flag"]:
            argv += [spec["disaggregation_flag"], role]
        notes.append(spec["disaggregation_note"])
    if workers is not None:
        notes.append(f"run {workers} instance(s) of this command (the rate-matched pool)")
    return LaunchConfig(engine, role, argv, _missing(engine, plan) + prec_missing, notes)
