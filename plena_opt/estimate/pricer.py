"""The layer-pricer contract and its registry, keyed by the chip profile's ``kind``.

A chip kind is priced by one ``LayerPricer`` subclass: it turns a layer (and the embedding / LM
head "extras") of one device into ``StageArrays``, says how the TP collectives of its layers are
carried, the bytes of its weights, its energy per token and what its estimate reports about the
chip. ``EstimateContext`` builds the pricer of its chip once (``pricer_for``) and the passes,
footprints, warnings and metrics call it; no module outside the pricer asks which kind it is.

Built-in kinds: ``plena`` (ISA cycles + a stage roofline, ``estimate.plena_pricer``) and ``gpu``
(kernel-by-kernel roofline, ``estimate.gpu``). A new kind is one module of this package that
subclasses ``LayerPricer`` and calls ``register_pricer`` (or a line in ``_BUILTIN`` below);
an unknown kind is refused naming the field ``kind``.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from plena_opt.errors import PlenaInputError

if TYPE_CHECKING:
    from collections.abc import Hashable

    import numpy as np

    from plena_opt.chip import PerfModel
    from plena_opt.estimate.distributed import PlanCost
    from plena_opt.estimate.layer import LayerKind, LayerShape
    from plena_opt.estimate.moe_load import MoeLoad
    from plena_opt.estimate.plan import Workload
    from plena_opt.estimate.pricing import StageArrays, StepWeights
    from plena_opt.memory import HbmStoragePrecision, Memory
    from plena_opt.models import ModelSpec

# kind -> the module that registers its pricer on import (imported on first use, so this module
# imports no pricer and no pricer module imports the registry's users)
_BUILTIN = {"plena": "plena_opt.estimate.plena_pricer", "gpu": "plena_opt.estimate.gpu"}
_REGISTRY: dict[str, type[LayerPricer]] = {}


@dataclass(frozen=True)
class CollectiveOptions:
    """How a layer's collectives are priced on this chip kind (``comm.layer_collectives``):
    the MoE load the TP all-reduce after the experts sees, whether the shared experts' partial
    sums ride in the routed experts' all-reduce, the bytes per reduced element (None: the
    precision's activations), whether the EP dispatch's closed form counts one copy per
    distinct destination rank (``deepstack`` ``distinct_ranks``; False: network-model §8.2's
    top-k/ep) and the bytes per element the EP combine carries (None: the dispatch's)."""

    load: MoeLoad | None
    shared_with_experts: bool
    reduce_bytes: float | None
    distinct_ranks: bool = False
    combine_bytes: float | None = None


_DENSE_OPTIONS = CollectiveOptions(None, False, None)  # frozen: one for every dense layer


class LayerPricer(ABC):
    """Prices the layers of one chip kind for one evaluation (model × memory × workload).

    Class-level hooks (``storage_precision``, ``checkpoint_workload``, ``own_memory``,
    ``precision_notes``) answer before a context exists; the instance prices layers."""

    kind: ClassVar[str]
    carries_memory: ClassVar[bool] = False  # the profile names its own memory (a GPU's HBM)
    # why the one-device estimate without a NoC does not apply to this kind (None: it does)
    single_chip_refusal: ClassVar[str | None] = None
    every_decode_step: ClassVar[bool] = False  # decode grids keep every step (no ISA stairs)
    default_dram_energy: ClassVar[bool] = True  # a memory without energy: the cited default
    # priced layers do not depend on the batch size beyond the shard (dense models only;
    # ``estimate.memo`` then shares them across the evaluators of a search)
    shares_layers_across_batches: ClassVar[bool] = False
    perf_model: PerfModel | None = None  # the PLENA ISA model ``LayerShape`` reads (None: none)
    decode_tile: int = 1  # tokens of one decode stair (PLENA: MLEN)
    # bytes per element of the weights other than the routed experts where they differ from the
    # storage precision's (an experts-only quantised checkpoint); None: every weight alike
    dense_weight_bytes: float | None = None
    # MLA projections a quantised checkpoint keeps in bf16 (``Workload.bf16_attention`` where the
    # pricer applies it; "": none)
    bf16_attention: str = ""

    # -- before a context: the chip's formats and memory --------------------------------------
    @classmethod
    def storage_precision(cls, chip: Any, workload: Workload) -> HbmStoragePrecision | None:
        """Bytes per stored element for the workload's formats; None: the default."""
        return None

    @classmethod
    def checkpoint_workload(cls, chip: Any, model: ModelSpec, workload: Workload) -> Workload:
        """``workload`` with the chip's format defaulted from the checkpoint (default: as is)."""
        return workload

    @classmethod
    def own_memory(cls, chip: Any) -> Memory | None:
        """The memory the chip profile carries (``carries_memory``), else None."""
        return None

    @classmethod
    def precision_notes(cls, chip: Any, model: ModelSpec | None, formats: list) -> list[str]:
        """What a search states about the formats it prices on this chip (default: nothing)."""
        return []

    # -- one evaluation ------------------------------------------------------------------------
    @abstractmethod
    def __init__(self, chip: Any, precision: HbmStoragePrecision, workload: Workload,
                 memory: Memory, model: ModelSpec | None = None) -> None:  # fmt: skip
        """Fix the chip, storage precision, workload, memory and model of one evaluation."""

    @abstractmethod
    def layer(self, s: LayerShape, kind: LayerKind, mode: str, q: int, kv: np.ndarray,
              load: MoeLoad | None, steps: StepWeights, cp: int) -> StageArrays:  # fmt: skip
        """One layer on one device at the KV lengths ``kv`` (``steps``: decode steps each
        point stands for); ``q`` tokens per sequence, ``cp`` the context-parallel degree."""

    @abstractmethod
    def extras(self, s: LayerShape, mode: str, q: int, steps: StepWeights, last_stage: int,
               cache: dict, key: Hashable) -> dict[int, list[StageArrays]]:  # fmt: skip
        """Embedding / step overhead / LM head priced as stages, by pipeline stage index
        (``cache``/``key``: where a pricer may keep what plans of another depth share)."""

    def collective_options(self, load: MoeLoad | None) -> CollectiveOptions:
        """The PLENA reference's collectives: the experts' pairs, separate shared sums."""
        return _DENSE_OPTIONS if load is None else CollectiveOptions(load, False, None)

    def chip_warnings(self, model: ModelSpec) -> list[str]:
        """Warnings about what this chip kind does not price for ``model``."""
        return []

    def describe(self) -> dict | None:
        """The ``chip`` field of an estimate (None: the reference report has none)."""
        return None

    def power_report(self) -> dict | None:
        """The ``chip_power`` field of an estimate's document (None: not reported)."""
        return None

    @abstractmethod
    def energy_per_token(self, cost: PlanCost, base: float | None) -> float | None:
        """Joules per generated token of a priced plan, given ``base`` (J: DRAM + NoC energy
        per bit, None where the memory has no energy figure)."""


def register_pricer(cls: type[LayerPricer]) -> type[LayerPricer]:
    """Register ``cls`` for chip profiles whose ``kind`` is ``cls.kind`` (a class decorator)."""
    _REGISTRY[cls.kind] = cls
    return cls


def chip_kind(chip: Any) -> str:
    """The ``kind`` of a loaded chip profile (a PLENA ``ChipProfile`` says ``plena``)."""
    return getattr(chip, "kind", "plena")


def pricer_class(kind: str) -> type[LayerPricer]:
    """The pricer registered for chip ``kind``; an unknown kind is refused naming ``kind``."""
    cls = _REGISTRY.get(kind)
    if cls is None and kind in _BUILTIN:
        importlib.import_module(_BUILTIN[kind])
        cls = _REGISTRY.get(kind)
    if cls is None:
        known = ", ".join(sorted({*_BUILTIN, *_REGISTRY}))
        raise PlenaInputError("kind", f"chip kind {kind!r} has no pricer (known kinds: {known})")
    return cls


def pricer_of(chip: Any) -> type[LayerPricer]:
    """The pricer class of a loaded chip profile (by its ``kind``)."""
    return pricer_class(chip_kind(chip))


def pricer_for(chip: Any, precision: HbmStoragePrecision, workload: Workload, memory: Memory,
               model: ModelSpec | None = None) -> LayerPricer:  # fmt: skip
    """The pricer of ``chip`` for one evaluation."""
    return pricer_of(chip)(chip, precision, workload, memory, model)


def known_kinds() -> list[str]:
    """Every chip kind with a pricer (built-in and registered)."""
    return sorted({*_BUILTIN, *_REGISTRY})


def chip_memory(chip: Any) -> Memory | None:
    """The memory a loaded chip profile carries (a GPU's HBM), else None (None: no chip)."""
    if chip is None:
        return None
    cls = pricer_of(chip)
    return cls.own_memory(chip) if cls.carries_memory else None


def storage_precision(chip: Any, workload: Workload) -> HbmStoragePrecision | None:
    """Bytes per element for the workload's formats on ``chip``'s kind; None = the default."""
    return pricer_of(chip).storage_precision(chip, workload)


def checkpoint_workload(chip: Any, model: ModelSpec, workload: Workload) -> Workload:
    """``workload`` with the chip's format defaulted from the checkpoint (its kind's rule)."""
    return pricer_of(chip).checkpoint_workload(chip, model, workload)


def precision_notes(chip: Any, model: ModelSpec | None, formats: list) -> list[str]:
    """What a search states about the formats it prices on ``chip`` (its kind's notes)."""
    return pricer_of(chip).precision_notes(chip, model, formats)
