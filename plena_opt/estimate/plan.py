"""Parallel plan and workload: the inputs of one estimate, validated with the reference wording.

Analytic-model §4.2 (plan legality) and §4.6. A ``Plan`` is one point of the search space; a
``Workload`` is what is served (batch, prompt and output lengths) and how it is priced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from plena_opt import bounds as _bounds
from plena_opt.errors import PlenaInputError, PlenaTypeError
from plena_opt.vocabulary import (
    COMM_OVERLAPS,
    MOE_ROUTING_MODES,
    MOE_TP_MODES,
    OVERLAP_POLICIES,
    PLAN_DIMS,
)

ROUTING_MODES = MOE_ROUTING_MODES  # MoE token routing (not NoC routing)
# What a bare command prices (built-in names; see ``ProblemSpec``).
DEFAULT_MODEL = "llama-3.1-70b"
DEFAULT_NOC = "illustrative_gpu_cluster_32"
DEFAULT_MEMORY = "fictional_stacked_dram"
__all__ = [
    "DEFAULT_MEMORY",
    "DEFAULT_MODEL",
    "DEFAULT_NOC",
    "COMM_OVERLAPS",
    "MOE_TP_MODES",
    "OVERLAP_POLICIES",
    "PLAN_DIMS",
    "ROUTING_MODES",
    "Plan",
    "Workload",
    "check_choice",
    "check_int",
    "divisors",
    "factorisations",
]
# Sanity bounds of a workload (sequences, tokens): plena_opt.bounds, the same in every front end.
MAX_WORKLOAD = {
    "batch_size": _bounds.MAX_BATCH_SIZE,
    "input_seq_len": _bounds.MAX_INPUT_SEQ,
    "output_seq_len": _bounds.MAX_OUTPUT_SEQ,
}
MIN_FREQUENCY_HZ, MAX_FREQUENCY_HZ = 1.0, 1e15


def check_int(field: str, value: object, *, minimum: int = 1) -> int:
    """``value`` if it is an int (not bool) ≥ ``minimum``; else raise naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlenaTypeError(field, f"{field} must be an integer")
    if value < minimum:
        rule = "greater than zero" if minimum == 1 else f"at least {minimum}"
        raise PlenaInputError(field, f"{field} must be {rule}")
    return value


def check_choice(field: str, value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise PlenaInputError(field, f"{field} must be one of {', '.join(choices)}")
    return str(value)


def divisors(n: int) -> list[int]:
    """Positive divisors of ``n`` in increasing order."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def factorisations(n: int, parts: int = 5) -> list[tuple[int, ...]]:
    """Every ordered ``parts``-tuple of positive integers whose product is ``n``; with the default
    5 parts, the (tp, ep, dp, pp, cp) shapes of every plan on ``n`` devices (the one plan
    enumeration: ``Evaluator.candidate_plans`` and the search's ``PlanSpace`` both use it).

    Pure arithmetic on ``n``, so the tuples are found once per process (a table of the last
    ``FACTORISATION_MEMO`` device counts) and every call gets its own list of them."""
    return list(_factorisations(n, parts))


FACTORISATION_MEMO = 64  # device counts whose factorisations a process keeps (a few KiB each)


@lru_cache(maxsize=FACTORISATION_MEMO)
def _factorisations(n: int, parts: int) -> tuple[tuple[int, ...], ...]:
    divs = divisors(n)  # every divisor of a part is a divisor of n: found once
    memo: dict[tuple[int, int], list[tuple[int, ...]]] = {}

    def split(m: int, k: int) -> list[tuple[int, ...]]:
        if k == 1:
            return [(m,)]
        hit = memo.get((m, k))
        if hit is None:
            hit = memo[m, k] = [
                (d, *rest) for d in divs if d <= m and m % d == 0 for rest in split(m // d, k - 1)
            ]
        return hit

    return tuple(split(n, parts))


@dataclass(frozen=True, order=True)
class Plan:
    """How the model is split over the devices (analytic-model §4.2).

    ``tp·ep·dp·pp·cp`` devices. Attention runs ``tp`` × ``ep`` per expert group (``ep`` ranks
    are attention data-parallel: each holds its own sequences and KV cache) and ``dp`` replicas
    of the group. The routed experts run ``moe_tp`` × ``moe_ep`` over the same ``tp·ep`` devices
    (``moe_split``): ``moe_tp`` > 0 names the experts' TP degree (any divisor of ``tp·ep``);
    ``moe_tp`` = 0 takes it from ``moe_tp_mode``, the shorthands ``replace`` (fold the TP ranks
    into EP ranks) and ``keep`` (experts keep the attention TP). ``comm_overlap`` says whether a
    layer's collectives overlap its compute (``full``: max, ``none``: sum).
    """

    tp: int = 1
    ep: int = 1
    dp: int = 1
    pp: int = 1
    cp: int = 1
    moe_tp_mode: str = "replace"
    comm_overlap: str = "none"
    moe_tp: int = 0

    def __post_init__(self) -> None:
        for dim in PLAN_DIMS:
            check_int(dim, getattr(self, dim))
        check_choice("moe_tp_mode", self.moe_tp_mode, MOE_TP_MODES)
        check_choice("comm_overlap", self.comm_overlap, COMM_OVERLAPS)
        check_int("moe_tp", self.moe_tp, minimum=0)
        group = self.tp * self.ep
        if self.moe_tp and self.moe_tp_mode != "replace":
            raise PlenaInputError(
                "moe_tp", "give moe_tp or moe_tp_mode keep, not both (they name the same split)"
            )
        if self.moe_tp and group % self.moe_tp:
            raise PlenaInputError(
                "moe_tp",
                f"moe_tp={self.moe_tp} must divide the tp*ep={group} devices of an expert group "
                "(moe_tp x moe_ep = tp x ep)",
            )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Plan:
        """The plan of a ``plan`` mapping (a front entry, a trial attribute, a JSON document);
        missing keys take the defaults, extra keys (``world_size``, ``batch_size``) are ignored."""
        kw: dict[str, Any] = {k: int(d[k]) for k in PLAN_DIMS if k in d}
        for k in ("moe_tp_mode", "comm_overlap"):
            if k in d:
                kw[k] = str(d[k])
        if d.get("moe_tp"):
            kw["moe_tp"] = int(d["moe_tp"])
        return cls(**kw)

    @classmethod
    def enumerated(
        cls, tp: int, ep: int, dp: int, pp: int, cp: int, mode: str, overlap: str
    ) -> Plan:
        """A plan of values the enumeration produced (positive ints from ``factorisations``,
        ``mode`` and ``overlap`` from the vocabulary), built without re-checking them: the
        same object ``Plan(...)`` gives, in a fraction of the time."""
        plan = object.__new__(cls)
        plan.__dict__.update(
            tp=tp, ep=ep, dp=dp, pp=pp, cp=cp, moe_tp_mode=mode, comm_overlap=overlap, moe_tp=0
        )
        return plan

    @property
    def world_size(self) -> int:
        return self.tp * self.ep * self.dp * self.pp * self.cp

    def fields(self) -> dict:
        """Every field (``moe_tp`` only when set: a shorthand plan keeps the reference keys)."""
        d = asdict(self)
        if not self.moe_tp:
            del d["moe_tp"]
        return d

    def to_dict(self) -> dict:
        """The reference ``plan`` field (without ``comm_overlap``, which is an estimate option)."""
        d = {k: v for k, v in asdict(self).items() if k not in ("comm_overlap", "moe_tp")}
        if self.moe_tp:  # an explicit MoE split (absent for the shorthands, as the reference)
            d["moe_tp"] = self.moe_tp
            d["moe_ep"] = self.tp * self.ep // self.moe_tp
        d["world_size"] = self.world_size
        return d

    def label(self) -> str:
        """Short human label, e.g. ``tp8 pp4`` (dims of 1 omitted)."""
        parts = [f"{d}{getattr(self, d)}" for d in PLAN_DIMS if getattr(self, d) != 1]
        text = " ".join(parts) or "single"
        if self.moe_tp:
            text += f" moe-tp{self.moe_tp}xep{self.tp * self.ep // self.moe_tp}"
        elif self.moe_tp_mode != "replace":
            text += f" {self.moe_tp_mode}"
        if self.comm_overlap != "none":
            text += " overlap"
        return text


@dataclass(frozen=True)
class Workload:
    """What is served and how it is priced.

    ``batch_size`` sequences (global), ``input_seq_len`` prompt tokens, ``output_seq_len`` generated
    tokens; ``frequency_hz`` nominal compute clock (Hz, before the memory's thermal scale);
    ``overlap_policy`` combines compute and DRAM time per stage; ``routing`` selects MoE routing.
    ``precision`` / ``kv_precision`` name the weight/activation and KV-cache formats
    (``plena_opt.chip.precision.FORMATS``); None keeps the chip's default (PLENA: MXFP8, GPU: the
    checkpoint's ``quantization_config`` format, else bf16).
    """

    batch_size: int = 16
    input_seq_len: int = 2048
    output_seq_len: int = 1024
    frequency_hz: float = 1e9
    overlap_policy: str = "stage-roofline"
    include_lm_head: bool = False
    routing: str = "balanced"
    precision: str | None = None
    kv_precision: str | None = None
    eplb_redundant: int = 0  # EPLB redundant expert replicas over the EP ranks (estimate.eplb)
    # fp8 weights with 128x128 block scales (``fp8_block``): the dense GEMMs / the routed
    # experts run the chip's ``fp8_block`` kernel curves (GPU; False: per-tensor fp8, except
    # the experts of estimate.gpu.BLOCK_FP8_MODEL_TYPES)
    fp8_block_gemm: bool = False
    fp8_block_moe: bool = False
    # weight-only (W4A16) routed experts run vLLM's Marlin MoE (``VLLM_MXFP4_USE_MARLIN=1``)
    # rather than the backend the chip's ``moe.<format>`` curve measured (GPU; ``chip.gpu.perf
    # .MARLIN_MOE_NOTE``)
    marlin_moe: bool = False
    # block-scaled fp8 routed experts run TensorRT-LLM's generated MoE kernels (SGLang
    # ``--moe-runner-backend flashinfer_trtllm``, TensorRT-LLM ``moe_config.backend: TRTLLM``;
    # GPU; ``chip.gpu.perf.TRTLLM_GEN_MOE_NOTE``)
    trtllm_gen_moe: bool = False
    # 4-bit routed experts multiplied with MXFP8 activations (``kind::mxf8f6f4``: TensorRT-LLM's
    # TRTLLM MoE backend, vLLM ``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1``): their compute at the
    # chip's fp8 rate (GPU; ``chip.gpu.perf.MXFP8_MOE_NOTE``)
    mxfp8_moe: bool = False
    # 4-bit routed experts multiplied with bf16 activations on fp4-capable tensor cores (vLLM
    # 0.34.0's Blackwell default for MXFP4, FlashInfer TRT-LLM-gen MXFP4 x BF16): their compute
    # at the chip's bf16 rate (GPU; ``chip.gpu.perf.BF16_MOE_NOTE``)
    bf16_moe: bool = False
    # the serving engine whose MoE kernel prices an MXFP4 checkpoint's experts (GPU;
    # ``chip.gpu.moe_kernels``): "vllm" (the default engine everywhere), "sglang", "trtllm" or ""
    # (none); ``moe_kernel`` "default" takes that engine's default kernel, or names one. The
    # flags above, where one is set, are the kernel (``validate``'s recipes) and win over both
    engine: str = "vllm"
    moe_kernel: str = "default"
    # MLA attention projections a quantised checkpoint keeps in bf16 (GPU;
    # ``models.checkpoint.BF16_ATTENTION``): "" none (every GEMM at ``precision``), "all" (NVIDIA's
    # DeepSeek-R1 NVFP4 v1), "all_but_o" (the v2 checkpoints: o_proj quantised too)
    bf16_attention: str = ""
    # the engine fuses a quantised GEMM's input quantisation into the kernel before it (GPU;
    # TensorRT-LLM, ``serving.engines``): the GEMM reads the stored input, no bf16 quantisation
    # passes (``chip.gpu.kernel_bytes.gemm_operand_bytes``)
    fused_input_quant: bool = False
    # the checkpoint carries static per-tensor fp8 activation scales (GPU; NVIDIA ModelOpt
    # ``…-FP8``, ``models.checkpoint.fp8_static_input``): its input quantisation is one bf16 pass,
    # not the dynamic scale's two (``chip.gpu.kernel_bytes.STATIC_QUANT_PASSES``)
    fp8_static_input: bool = False

    def __post_init__(self) -> None:
        for name in ("batch_size", "input_seq_len", "output_seq_len"):
            value = check_int(name, getattr(self, name))
            if value > MAX_WORKLOAD[name]:
                raise PlenaInputError(
                    name, f"{name} must be at most {MAX_WORKLOAD[name]} (got {value})"
                )
        f = self.frequency_hz
        if isinstance(f, bool) or not isinstance(f, int | float):
            raise PlenaTypeError("frequency_hz", "frequency_hz must be a number")
        if not f > 0:
            raise PlenaInputError("frequency_hz", "frequency_hz must be greater than zero")
        if not MIN_FREQUENCY_HZ <= f <= MAX_FREQUENCY_HZ:
            raise PlenaInputError(
                "frequency_hz",
                f"frequency_hz must be a finite clock between {MIN_FREQUENCY_HZ:g} and "
                f"{MAX_FREQUENCY_HZ:g} Hz (got {f!r})",
            )
        for name in (
            "include_lm_head",
            "fp8_block_gemm",
            "fp8_block_moe",
            "marlin_moe",
            "trtllm_gen_moe",
            "mxfp8_moe",
            "fused_input_quant",
            "fp8_static_input",
            "bf16_moe",
        ):
            if not isinstance(getattr(self, name), bool):
                raise PlenaTypeError(name, f"{name} must be a bool")
        check_choice("overlap_policy", self.overlap_policy, OVERLAP_POLICIES)
        from plena_opt.models.checkpoint import BF16_ATTENTION

        check_choice("bf16_attention", self.bf16_attention, BF16_ATTENTION)
        from plena_opt.chip.gpu.moe_kernels import ENGINES, check_moe_kernel

        if self.engine:
            check_choice("engine", self.engine, ENGINES)
        check_moe_kernel(self.moe_kernel)
        if self.moe_kernel != "default" and not self.engine:
            raise PlenaInputError("moe_kernel", "moe_kernel names an engine's kernel: give engine")
        if self.moe_kernel != "default" and (self.marlin_moe or self.mxfp8_moe or self.bf16_moe):
            raise PlenaInputError(
                "moe_kernel", "moe_kernel and marlin_moe / mxfp8_moe / bf16_moe: give one"
            )
        if not isinstance(self.routing, str) or not self.routing:
            raise PlenaInputError("routing", "routing must be a mode name or a trace file path")
        from plena_opt.chip.precision import check_format
        from plena_opt.estimate.eplb import FLAG, MAX_REDUNDANT

        if check_int(FLAG, self.eplb_redundant, minimum=0) > MAX_REDUNDANT:
            raise PlenaInputError(FLAG, f"{FLAG} must be at most {MAX_REDUNDANT}")

        for name in ("precision", "kv_precision"):
            if getattr(self, name) is not None:
                check_format(getattr(self, name), name)

    def with_lengths(self, batch_size: int, output_seq_len: int) -> Workload:
        """``replace(self, batch_size=…, output_seq_len=…)`` checking only the two fields that
        change (the others passed ``__post_init__`` when this workload was built): an equal
        object (same fields, ``==`` and ``hash``), without the whole validation."""
        top = MAX_WORKLOAD
        if (type(batch_size) is int and type(output_seq_len) is int  # the usual case, inline
                and 0 < batch_size <= top["batch_size"]
                and 0 < output_seq_len <= top["output_seq_len"]):  # fmt: skip
            return self._relengthed(batch_size, output_seq_len)
        for name, value in (("batch_size", batch_size), ("output_seq_len", output_seq_len)):
            if check_int(name, value) > MAX_WORKLOAD[name]:
                raise PlenaInputError(
                    name, f"{name} must be at most {MAX_WORKLOAD[name]} (got {value})"
                )
        return self._relengthed(batch_size, output_seq_len)

    def _relengthed(self, batch_size: int, output_seq_len: int) -> Workload:
        """``with_lengths`` without its checks, for values already known valid."""
        new = object.__new__(type(self))
        d = new.__dict__
        d.update(self.__dict__)
        d["batch_size"], d["output_seq_len"] = batch_size, output_seq_len
        return new
