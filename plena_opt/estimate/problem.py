"""The problem being priced: model, cluster (NoC), memory, chip and workload.

``ProblemSpec`` is the serialisable description every front end shares (CLI flags, gRPC requests,
a Python script): each of model, NoC, memory and chip is a built-in name, a JSON path or an inline
document (``InlineDocument``). ``ProblemSpec.load()`` turns it into the typed objects the
evaluator takes (``EvaluatorInputs``). Loader errors from ``deepstack`` (``ProfileError``) are
re-raised as ``PlenaInputError`` so every caller reports them the same way (docs/ARCHITECTURE.md,
Errors).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

import plena_opt.jsonio as jsonio
from plena_opt.errors import PlenaInputError
from plena_opt.vocabulary import OverlapPolicy

if TYPE_CHECKING:  # loaded lazily: the CLI reads the defaults here before any heavy import
    from deepstack import NocProfile

    from plena_opt.chip import ChipProfile
    from plena_opt.estimate.evaluator import Evaluator
    from plena_opt.estimate.plan import Workload
    from plena_opt.memory import Memory
    from plena_opt.models import ModelSpec

from plena_opt.chip.gpu.kernel_bytes import FUSED_QUANT_ENGINES
from plena_opt.chip.gpu.moe_kernels import DEFAULT_ENGINE
from plena_opt.estimate.memo import PricingMemo
from plena_opt.estimate.plan import DEFAULT_MEMORY, DEFAULT_MODEL, DEFAULT_NOC

__all__ = [
    "DEFAULT_MEMORY",
    "DEFAULT_MODEL",
    "DEFAULT_NOC",
    "EvaluatorInputs",
    "InlineDocument",
    "ProblemSpec",
]


@dataclass(frozen=True)
class EvaluatorInputs:
    """Loaded inputs of ``Evaluator``: model, NoC (None: single-chip estimate only), memory,
    workload and chip (None: the default chip)."""

    model: ModelSpec
    noc: NocProfile | None
    memory: Memory
    workload: Workload
    chip: ChipProfile | None = None
    # Shared by the evaluators of these inputs (``with_batch`` copies keep it): what one batch
    # size priced, another reuses where the per-device shard is the same (``estimate.memo``).
    memo: PricingMemo = field(default_factory=PricingMemo, compare=False, repr=False)

    def evaluator(self, batch_size: int | None = None, precision: str | None = None) -> Evaluator:
        """An ``Evaluator`` for these inputs, optionally with another global batch size
        (sequences) and weight/activation format (``precision``; None keeps the workload's)."""
        from plena_opt.estimate.evaluator import Evaluator

        if self.noc is None:
            raise PlenaInputError("noc", "the distributed estimate needs a NoC profile")
        w = self.with_batch(batch_size).workload
        if precision is not None:
            w = replace(w, precision=precision)
        return Evaluator(self.model, self.noc, self.memory, w, chip=self.chip, memo=self.memo)

    def with_batch(self, batch_size: int | None) -> EvaluatorInputs:
        """A copy whose workload serves ``batch_size`` sequences (None keeps the current one)."""
        if batch_size is None or batch_size == self.workload.batch_size:
            return self
        return replace(self, workload=replace(self.workload, batch_size=batch_size))


class InlineDocument(BaseModel):
    """A JSON document given inline instead of a name or path: an HF ``config.json`` for the
    model, or a profile in the shipped schema for the NoC, memory or chip. ``name`` names an
    inline model (default ``custom``); ``text`` is the document as received, when it came as
    text (its digest then names studies, as the server always did)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    document: dict[str, Any]
    name: str = ""
    text: str | None = Field(default=None, repr=False)

    def digest(self) -> str:
        """12 hex digits of the document's text (``text``, else its canonical JSON)."""
        text = self.text if self.text is not None else json.dumps(self.document, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]

    def study_key(self, kind: str) -> str:
        """The document's key in a study fingerprint, ``inline-<digest>/<name>.json``.

        v0.1 of the server named inline documents so; the key is kept so stored studies resume.
        """
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", self.name)[:64] or kind
        return f"inline-{self.digest()}/{safe}.json"


Source = str | InlineDocument


def _as_input_error(exc: Exception, default_field: str) -> PlenaInputError:
    """Map a loader error carrying ``field``/``rule`` (deepstack's ProfileError) to ours."""
    if isinstance(exc, PlenaInputError):
        return exc
    field = getattr(exc, "field", None) or default_field
    return PlenaInputError(str(field), str(exc))


def _source(value: Source | None) -> str | dict | None:
    return value.document if isinstance(value, InlineDocument) else value


def chip_source_kind(source: Source | None) -> str | None:
    """The ``kind`` a chip source names without loading it: a built-in name's, or a JSON
    document's or file's ``kind`` (``plena`` where it names none). None: no source, or one that
    cannot be read here (loading reports it by field)."""
    if isinstance(source, InlineDocument):
        doc = source.document
        return str(doc.get("kind", "plena")) if isinstance(doc, dict) else None
    if not isinstance(source, str):
        return None
    from plena_opt.chip.gpu import gpu_profile_names

    if source in gpu_profile_names():
        return "gpu"
    path = Path(source)
    if path.suffix.lower() != ".json" or not path.is_file():
        return "plena"  # a built-in PLENA name (an unknown one is refused when loaded)
    try:
        doc = jsonio.load_document(path.read_bytes(), "chip", "chip profile")
    except (OSError, PlenaInputError):
        return None
    return str(doc.get("kind", "plena")) if isinstance(doc, dict) else None


def names_gpu_chip(source: Source | None) -> bool:
    """Whether a chip source names a GPU profile (a built-in GPU name, or a JSON document or file
    with ``"kind": "gpu"``). Unreadable sources answer False; loading reports them by field."""
    return chip_source_kind(source) == "gpu"


def chip_carries_memory(source: Source | None) -> bool:
    """Whether the chip a source names carries its own memory (its kind's pricer says so: a
    GPU's HBM), so no memory profile is defaulted. Unreadable sources and unknown kinds answer
    False; loading reports them by field."""
    from plena_opt.estimate.pricer import known_kinds, pricer_class

    kind = chip_source_kind(source)
    return kind in known_kinds() and pricer_class(kind).carries_memory


class ProblemSpec(BaseModel):
    """What to serve and on what.

    ``model``/``noc``/``memory``/``chip``: a built-in name, a JSON path (``model_path`` for an HF
    config file) or an ``InlineDocument``. ``fixed_bandwidth_gbs`` (GB/s) replaces ``memory`` by a
    fixed-bandwidth memory with optional ``fixed_capacity_gib`` (GiB); ``total_layers`` /
    ``connected_layers`` restack a stacked-DRAM profile; ``batch_size`` sequences,
    ``input_seq``/``output_seq`` tokens; ``frequency_hz`` is the nominal compute clock (Hz).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: Source | None = DEFAULT_MODEL
    model_path: str | None = None
    noc: Source = DEFAULT_NOC
    memory: Source | None = DEFAULT_MEMORY
    fixed_bandwidth_gbs: float | None = Field(default=None, gt=0)
    fixed_capacity_gib: float | None = Field(default=None, gt=0)
    total_layers: int | None = Field(default=None, ge=1)
    connected_layers: int | None = Field(default=None, ge=1)
    chip: Source | None = None
    batch_size: int = Field(default=16, ge=1)
    input_seq: int = Field(default=2048, ge=1)
    output_seq: int = Field(default=1024, ge=1)
    include_lm_head: bool = False
    overlap: OverlapPolicy = OverlapPolicy.STAGE_ROOFLINE
    routing: str = "balanced"
    frequency_hz: float = Field(default=1e9, gt=0)
    precision: str | None = None
    kv_precision: str | None = None
    devices: int | None = Field(default=None, ge=1, le=65536)
    eplb_redundant: int | None = Field(default=None, ge=0, le=1 << 16)  # estimate.eplb
    # the serving engine whose MoE kernel prices an MXFP4 checkpoint's experts on a GPU (None:
    # vLLM, the default engine everywhere) and the kernel (None: that engine's default;
    # ``chip.gpu.moe_kernels``)
    engine: str | None = None
    moe_kernel: str | None = None

    @model_validator(mode="after")
    def _check(self) -> ProblemSpec:
        if self.fixed_capacity_gib is not None and self.fixed_bandwidth_gbs is None:
            raise ValueError("fixed_capacity_gib requires fixed_bandwidth_gbs")
        if self.connected_layers is not None and self.total_layers is None:
            raise ValueError("connected_layers requires total_layers")
        if self.total_layers is not None and self.fixed_bandwidth_gbs is not None:
            raise ValueError("total_layers applies to stacked_dram profiles, not fixed bandwidth")
        unset = "memory" not in self.model_fields_set and self.fixed_bandwidth_gbs is None
        if unset and chip_carries_memory(self.chip):
            object.__setattr__(self, "memory", None)  # a GPU chip carries its HBM (frozen model)
        return self

    def identity(self) -> dict[str, Any]:
        """The spec as plain JSON values, inline documents by ``InlineDocument.study_key``
        (what fingerprints and study attributes store)."""
        data = self.model_dump(mode="json")
        for key, kind in (("noc", "noc"), ("memory", "memory"), ("chip", "chip")):
            value = getattr(self, key)
            if isinstance(value, InlineDocument):
                data[key] = value.study_key(kind)
        if isinstance(self.model, InlineDocument):  # v0.1 sent inline models as a model path
            data["model"] = None
            data["model_path"] = self.model.study_key("model")
        return data

    def model_label(self) -> str:
        if isinstance(self.model, InlineDocument):
            return self.model.name or "custom"
        return self.model_path or str(self.model)

    def fingerprint(self) -> str:
        """Stable 12-hex digest of the spec (used to name studies and detect mismatches).

        Unset optional stack heights are left out, so adding such options keeps old names."""
        data = self.identity()
        for key in ("total_layers", "connected_layers", "precision", "kv_precision", "devices",
                    "eplb_redundant", "engine", "moe_kernel"):  # fmt: skip
            if data[key] is None:
                del data[key]
        if data.get("engine") == DEFAULT_ENGINE:  # what None prices: the same name
            del data["engine"]
        if data.get("moe_kernel") == "default":
            del data["moe_kernel"]
        text = json.dumps(data, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def workload(self, batch_size: int | None = None) -> Workload:
        from plena_opt.estimate.plan import Workload

        return Workload(
            batch_size=self.batch_size if batch_size is None else batch_size,
            input_seq_len=self.input_seq,
            output_seq_len=self.output_seq,
            frequency_hz=self.frequency_hz,
            overlap_policy=str(self.overlap),
            include_lm_head=self.include_lm_head,
            routing=self.routing,
            precision=self.precision,
            kv_precision=self.kv_precision,
            eplb_redundant=self.eplb_redundant or 0,
            engine=self.engine or DEFAULT_ENGINE,
            moe_kernel=self.moe_kernel or "default",
            fused_input_quant=(self.engine or DEFAULT_ENGINE) in FUSED_QUANT_ENGINES,
        )

    def load(self) -> EvaluatorInputs:
        """Load the model, NoC, memory and chip; raise ``PlenaInputError`` naming the bad field."""
        from deepstack import load_noc_profile

        model = self._load_model()
        try:
            noc = load_noc_profile(_source(self.noc))
            if self.devices is not None:
                from deepstack.gpu_nodes import first_devices

                noc = first_devices(noc, self.devices)
        except (ValueError, OSError) as exc:
            raise _as_input_error(exc, "noc") from exc
        chip = None
        if self.chip is not None:
            from plena_opt.chip import load_chip

            try:
                chip = load_chip(_source(self.chip))
            except (ValueError, OSError) as exc:
                raise _as_input_error(exc, "chip") from exc
        try:
            from plena_opt.estimate.pricer import chip_memory

            own = None
            if self.memory is None and self.fixed_bandwidth_gbs is None:
                own = chip_memory(chip)
            if own is not None:
                memory = own  # a GPU chip carries its HBM
            else:
                memory = self._load_memory()
        except (ValueError, OSError) as exc:
            raise _as_input_error(exc, "memory") from exc
        workload = self.workload()
        check_named_kernel(chip, model, workload)  # refused up front, naming moe_kernel
        return EvaluatorInputs(model, noc, memory, workload, chip)

    def _load_model(self) -> ModelSpec:
        from plena_opt.models import load_model

        try:
            if isinstance(self.model, InlineDocument):
                from plena_opt.models import ModelSpec

                return ModelSpec.from_hf_config(self.model.document, self.model_label())
            if self.model_path:
                return load_model(path=self.model_path)
            return load_model(name=self.model)
        except (ValueError, OSError) as exc:
            raise _as_input_error(exc, "model") from exc

    def _load_memory(self) -> Memory:
        import plena_opt.memory as mem

        if self.fixed_bandwidth_gbs is not None:
            return mem.fixed_bandwidth(self.fixed_bandwidth_gbs, self.fixed_capacity_gib)
        memory = mem.load_memory(_source(self.memory) or DEFAULT_MEMORY)
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


def check_named_kernel(chip: object, model: ModelSpec, workload: Workload) -> None:
    """A named ``workload.moe_kernel`` (not "default") needs a GPU chip that
    ``workload.engine`` runs it on at the format priced; else refused naming ``moe_kernel``
    before anything is priced (every front end's check: ``ProblemSpec.load``, the server)."""
    if workload.moe_kernel == "default":
        return
    if getattr(chip, "kind", None) != "gpu":
        raise PlenaInputError(
            "moe_kernel", "moe_kernel picks a serving engine's MoE kernel: give a GPU chip"
        )
    from plena_opt.estimate.gpu import DEFAULT_GPU_PRECISION, GpuPricing
    from plena_opt.estimate.gpu_moe import gpu_moe_kernel

    w = GpuPricing.checkpoint_workload(chip, model, workload)  # type: ignore[arg-type]
    gpu_moe_kernel(chip, model, workload, w.precision or DEFAULT_GPU_PRECISION)  # type: ignore[arg-type]
