"""The problem being optimised: model, cluster (NoC), memory, chip and workload, by name or path.

``ProblemSpec`` is the serialisable description shared by the CLI (``estimate``, ``search``,
``simulate``) and the gRPC server; ``ProblemSpec.load()`` turns it into the objects the evaluator
takes (``EvaluatorInputs``). Loader errors from ``deepstack`` (``ProfileError``) are re-raised as
``PlenaInputError`` so every caller reports them the same way (docs/ARCHITECTURE.md, Errors).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from plena_opt.errors import PlenaInputError

DEFAULT_MODEL = "llama-3.1-70b"
DEFAULT_NOC = "illustrative_gpu_cluster_32"
DEFAULT_MEMORY = "fictional_stacked_dram"


@dataclass(frozen=True)
class EvaluatorInputs:
    """Loaded inputs of ``plena_opt.estimate.Evaluator`` (model, noc, memory, workload, chip)."""

    model: Any
    noc: Any
    memory: Any
    workload: Any
    chip: Any = None

    def evaluator(self, batch_size: int | None = None) -> Any:
        """An ``Evaluator`` for these inputs, optionally with another global batch size."""
        from plena_opt.estimate import Evaluator

        return Evaluator(
            self.model, self.noc, self.memory, self.with_batch(batch_size).workload, chip=self.chip
        )

    def with_batch(self, batch_size: int | None) -> EvaluatorInputs:
        """A copy whose workload serves ``batch_size`` sequences (None keeps the current one)."""
        if batch_size is None or batch_size == self.workload.batch_size:
            return self
        from dataclasses import replace

        return EvaluatorInputs(
            self.model,
            self.noc,
            self.memory,
            replace(self.workload, batch_size=batch_size),
            self.chip,
        )


def _as_input_error(exc: Exception, default_field: str) -> PlenaInputError:
    """Map a loader error carrying ``field``/``rule`` (deepstack's ProfileError) to ours."""
    if isinstance(exc, PlenaInputError):
        return exc
    field = getattr(exc, "field", None) or default_field
    return PlenaInputError(str(field), str(exc))


class ProblemSpec(BaseModel):
    """What to serve and on what (names of shipped profiles or JSON paths).

    ``fixed_bandwidth_gbs`` (GB/s) replaces ``memory`` by a fixed-bandwidth memory with optional
    ``fixed_capacity_gib`` (GiB); ``frequency_hz`` is the nominal compute clock (Hz).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = DEFAULT_MODEL
    model_path: str | None = None
    noc: str = DEFAULT_NOC
    memory: str | None = DEFAULT_MEMORY
    fixed_bandwidth_gbs: float | None = Field(default=None, gt=0)
    fixed_capacity_gib: float | None = Field(default=None, gt=0)
    total_layers: int | None = Field(default=None, ge=1)
    connected_layers: int | None = Field(default=None, ge=1)
    chip: str | None = None
    batch_size: int = Field(default=16, ge=1)
    input_seq: int = Field(default=2048, ge=1)
    output_seq: int = Field(default=1024, ge=1)
    include_lm_head: bool = False
    overlap: str = "stage-roofline"
    routing: str = "balanced"
    frequency_hz: float = Field(default=1e9, gt=0)

    @model_validator(mode="after")
    def _check(self) -> ProblemSpec:
        if self.fixed_capacity_gib is not None and self.fixed_bandwidth_gbs is None:
            raise ValueError("fixed_capacity_gib requires fixed_bandwidth_gbs")
        if self.connected_layers is not None and self.total_layers is None:
            raise ValueError("connected_layers requires total_layers")
        if self.total_layers is not None and self.fixed_bandwidth_gbs is not None:
            raise ValueError("total_layers applies to stacked_dram profiles, not fixed bandwidth")
        return self

    def memory_label(self) -> str:
        if self.fixed_bandwidth_gbs is not None:
            cap = f", {self.fixed_capacity_gib:g} GiB" if self.fixed_capacity_gib else ""
            return f"fixed {self.fixed_bandwidth_gbs:g} GB/s{cap}"
        return str(self.memory)

    def model_label(self) -> str:
        return self.model_path or str(self.model)

    def fingerprint(self) -> str:
        """Stable 12-hex digest of the spec (used to name studies and detect mismatches).

        Unset optional stack heights are left out, so adding such options keeps old names."""
        data = self.model_dump()
        for key in ("total_layers", "connected_layers"):
            if data[key] is None:
                del data[key]
        text = json.dumps(data, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def workload(self, batch_size: int | None = None) -> Any:
        from plena_opt.estimate.plan import Workload

        return Workload(
            batch_size=self.batch_size if batch_size is None else batch_size,
            input_seq_len=self.input_seq,
            output_seq_len=self.output_seq,
            frequency_hz=self.frequency_hz,
            overlap_policy=self.overlap,
            include_lm_head=self.include_lm_head,
            routing=self.routing,
        )

    def load(self) -> EvaluatorInputs:
        """Load the model, NoC, memory and chip; raise ``PlenaInputError`` naming the bad field."""
        from plena_opt.models import load_model

        try:
            if self.model_path:
                model = load_model(path=self.model_path)
            else:
                model = load_model(name=self.model)
        except (ValueError, OSError) as exc:
            raise _as_input_error(exc, "model") from exc
        try:
            from deepstack import load_noc_profile

            noc = load_noc_profile(self.noc)
        except (ValueError, OSError) as exc:
            raise _as_input_error(exc, "noc") from exc
        try:
            memory = self._load_memory()
        except (ValueError, OSError) as exc:
            raise _as_input_error(exc, "memory") from exc
        chip = None
        if self.chip is not None:
            from plena_opt.chip import load_chip

            try:
                chip = load_chip(self.chip)
            except (ValueError, OSError) as exc:
                raise _as_input_error(exc, "chip") from exc
        return EvaluatorInputs(model, noc, memory, self.workload(), chip)

    def _load_memory(self) -> Any:
        import plena_opt.memory as mem

        if self.fixed_bandwidth_gbs is not None:
            return mem.fixed_bandwidth(self.fixed_bandwidth_gbs, self.fixed_capacity_gib)
        memory = mem.load_memory(self.memory or DEFAULT_MEMORY)
        if self.total_layers is None:
            return memory
        if not hasattr(memory, "with_layers"):
            raise PlenaInputError(
                "total_layers",
                f"--total-layers/--connected-layers apply to stacked_dram profiles only; "
                f"{memory.name} is {memory.kind}",
            )
        # The same stack design at another height (analytic-model §3.1, §3.5).
        return memory.with_layers(self.total_layers, self.connected_layers)
