"""A plan as the commands a team types to launch and measure it (``plena-opt export``).

The flag names live in one data file, ``engines.json``, with the engine version and the source
file each mapping was read from. A plan an engine cannot run as priced (``keep`` mode, a
parallel split the engine lacks, a KV format it cannot store) is *refused* for that engine: no
command is written, the reasons are (``LaunchConfig.refused``). The per-engine arguments are in
``engines.py``; a whole bundle (servers, router, benchmark) is assembled in ``bundle.py``.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from plena_opt.errors import PlenaInputError
from plena_opt.estimate.plan import Plan

ENGINES: dict[str, dict[str, Any]] = json.loads(
    resources.files("plena_opt.export").joinpath("engines.json").read_text()
)
ENGINE_NAMES = ("vllm", "sglang", "trtllm")
FORMATS = (*ENGINE_NAMES, "json")
HEAD_IP = "$HEAD_IP"  # the first node's address, a shell variable the scripts require
_KEY = re.compile(
    r"^tp(\d+)-ep(\d+)-dp(\d+)-pp(\d+)-cp(\d+)-(replace|keep|mtp\d+)-(none|full)-b(\d+)(?:-(\w+))?$"
)
_DEPLOYMENT = re.compile(r"^(\d+)P:([^+]+)\+(\d+)D:(.+)$")


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
            "point_key of a search trial) or 2P:KEY+3D:KEY (a disaggregated deployment)",
        )
    tp, ep, dp, pp, cp = (int(m.group(i)) for i in range(1, 6))
    prec = m.group(9)
    if prec is not None:
        from plena_opt.chip.precision import FORMATS as PRECISIONS

        if prec not in PRECISIONS:
            raise PlenaInputError(
                "plan", f"plan {text!r}: unknown precision {prec!r}; one of {', '.join(PRECISIONS)}"
            )
    mode = m.group(6)  # a shorthand, or ``mtpN``: an explicit MoE split (moe_tp = N)
    moe_tp = int(mode[3:]) if mode.startswith("mtp") else 0
    plan = Plan(tp, ep, dp, pp, cp, "replace" if moe_tp else mode, m.group(7), moe_tp)
    return plan, int(m.group(8)), prec


def parse_deployment_key(text: str) -> tuple[int, str, int, str] | None:
    """``2P:KEY+3D:KEY`` → (prefill workers, prefill key, decode workers, decode key); None for
    a plain plan key. Both keys are checked."""
    m = _DEPLOYMENT.match(text.strip())
    if m is None:
        return None
    x, pkey, y, dkey = int(m.group(1)), m.group(2), int(m.group(3)), m.group(4)
    if x < 1 or y < 1:
        raise PlenaInputError("plan", f"deployment {text!r}: worker counts must be at least 1")
    parse_point_key(pkey)
    parse_point_key(dkey)
    return x, pkey, y, dkey


@dataclass(frozen=True)
class ExportSpec:
    """What every command of a bundle shares: the model id the engine loads, the workload the
    plan was priced for (tokens), the memory budget (share of device memory) and node size."""

    model: str
    input_len: int
    output_len: int
    memory_fraction: float = 0.9
    gpus_per_node: int = 8
    precision: str | None = None
    kv_precision: str | None = None
    eplb_redundant: int = 0  # EPLB redundant experts (estimate.eplb); 0: off
    num_experts: int = 0  # the model's routed experts (TensorRT-LLM num_slots); 0: unknown
    # the MoE kernel the plan's MXFP4 experts were priced on (``chip.gpu.moe_kernels``): the GPU
    # chip profile, the model's checkpoint format and the kernel asked ("default": the engine's);
    # each engine writes the settings that select it (``engines.json`` ``moe_kernel``)
    chip: str | None = None
    checkpoint_precision: str | None = None
    moe_kernel: str = "default"
    # (engine, step token budget) each engine was priced with on the plan's GPU (the
    # ``serving.engines`` default, ``api.exports.export_moe``); its launch files write it, as
    # the engine's own default may differ by version; empty: nothing written
    budgets: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        if not self.model or self.model == "MODEL":
            raise PlenaInputError(
                "model",
                "the exported commands need the real model id: --model NAME (a catalog model "
                "with a Hugging Face id), --model-path DIR or --engine-model ID",
            )
        if self.input_len < 1 or self.output_len < 1:
            raise PlenaInputError("input_seq", "--input-seq and --output-seq must be positive")
        if not 0 < self.memory_fraction <= 1:
            raise PlenaInputError("memory_fraction", "--memory-fraction must be in (0, 1]")
        if self.gpus_per_node < 1:
            raise PlenaInputError("gpus_per_node", "--gpus-per-node must be at least 1")
        if self.eplb_redundant < 0:
            raise PlenaInputError("eplb_redundant", "--eplb-redundant must be at least 0")

    @property
    def max_len(self) -> int:
        return self.input_len + self.output_len


def _quote(arg: str) -> str:
    """Shell quoting that leaves ``$HEAD_IP`` to the shell."""
    if HEAD_IP in arg and re.fullmatch(r"[\w$.:/-]+", arg):
        return f'"{arg}"'
    return shlex.quote(arg)


@dataclass(frozen=True)
class LaunchConfig:
    """One command of a bundle (``role``: serve, prefill, decode, router or bench; ``node``:
    its node when one server spans nodes), or the reasons the engine cannot run the plan as
    priced (``refused``: then ``argv`` is empty). ``files``: files the command reads (name →
    text), written beside it."""

    engine: str
    role: str
    argv: list[str]
    notes: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    node: int | None = None
    files: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """File stem: ``vllm-serve``, ``sglang-prefill-node1``, …"""
        return f"{self.engine}-{self.role}" + ("" if self.node is None else f"-node{self.node}")

    @property
    def command(self) -> str:
        return " ".join(_quote(a) for a in self.argv)

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "role": self.role,
            "node": self.node,
            "argv": self.argv,
            "command": self.command,
            "refused": self.refused,
            "notes": self.notes,
            "files": self.files,
        }

    def script(self) -> str:
        """A shell script: the files it reads, then the command (a refusal: the reasons)."""
        spec = ENGINES[self.engine]
        lines = ["#!/bin/sh", f"# {spec['written_for']}", f"# flags from: {spec['source']}"]
        if self.refused:
            lines.append(f"# REFUSED: {self.engine} cannot run this plan as priced:")
            lines += [f"#   {r}" for r in self.refused]
            return "\n".join([*lines, "exit 1"]) + "\n"
        lines += [f"# note: {n}" for n in self.notes]
        if any(HEAD_IP in a for a in self.argv):
            lines.append(': "${HEAD_IP:?set HEAD_IP to the first node\'s address}"')
        for name, text in self.files.items():
            lines += [f"cat > {shlex.quote(name)} <<'EOF'", text.rstrip("\n"), "EOF"]
        lines.append(self.command)
        return "\n".join(lines) + "\n"
