"""The word lists of the product, in one place: argparse ``choices``, pydantic models, the proto
conversion and the validators of ``Plan``/``Workload`` all read them from here.

A leaf module (imports nothing of ``plena_opt``), so every layer may use it. Each vocabulary is a
``StrEnum`` (members compare equal to their text) and a tuple of its values in the documented
order (the order error messages list them in).
"""

from __future__ import annotations

from enum import StrEnum


class MoeTpMode(StrEnum):
    """How MoE layers use the TP ranks (analytic-model §4.2): fold them into EP ranks or keep
    experts tensor-parallel."""

    REPLACE = "replace"
    KEEP = "keep"


class CommOverlap(StrEnum):
    """Whether a layer's collectives overlap its compute (``full``: max, ``none``: sum)."""

    NONE = "none"
    FULL = "full"


class OverlapPolicy(StrEnum):
    """How compute and DRAM time combine in one stage (analytic-model §3.3)."""

    STAGE_ROOFLINE = "stage-roofline"
    SERIAL = "serial"


class MoeRouting(StrEnum):
    """Built-in MoE token-routing sources (analytic-model §4.2); a trace file path is the other
    accepted value of ``Workload.routing`` (local runs only). Not NoC routing (``deepstack``)."""

    BALANCED = "balanced"
    RANDOM = "random"
    QWEN3_235B = "qwen3_235b"
    DEEPSEEK_V3 = "deepseek_v3"
    POWER_LAW = "power_law"  # last: the reference's refusal message lists the four above first


class Sampler(StrEnum):
    """Search samplers (``auto`` picks exhaustive for small spaces, else a sampler)."""

    AUTO = "auto"
    TPE = "tpe"
    NSGA2 = "nsga2"
    GP = "gp"
    EXHAUSTIVE = "exhaustive"


class PlanDim(StrEnum):
    """The integer degrees of a parallel plan."""

    TP = "tp"
    EP = "ep"
    DP = "dp"
    PP = "pp"
    CP = "cp"


class Percentile(StrEnum):
    """Where on the Monte Carlo re-check distribution an SLA is judged (slow side)."""

    P50 = "p50"
    P90 = "p90"
    P99 = "p99"


class ServingMode(StrEnum):
    """Serving layouts compared by the search: one worker over all devices, prefill and decode
    pools, or both side by side."""

    AGGREGATED = "aggregated"
    DISAGGREGATED = "disaggregated"
    BOTH = "both"


class ServingSampler(StrEnum):
    """How the disaggregated deployments of ``--serving`` are searched: ``auto`` (exhaustive up
    to 256 devices, else role-front), every worker pair, pairs of workers on their role's own
    front, or an Optuna study over (format, prefill worker, decode worker)."""

    AUTO = "auto"
    EXHAUSTIVE = "exhaustive"
    ROLE_FRONT = "role-front"
    OPTUNA = "optuna"


def values(vocabulary: type[StrEnum]) -> tuple[str, ...]:
    """The texts of a vocabulary in declaration order."""
    return tuple(member.value for member in vocabulary)


MOE_TP_MODES = values(MoeTpMode)
COMM_OVERLAPS = values(CommOverlap)
OVERLAP_POLICIES = values(OverlapPolicy)
MOE_ROUTING_MODES = values(MoeRouting)
SAMPLERS = values(Sampler)
PLAN_DIMS = values(PlanDim)
PERCENTILES = values(Percentile)
SERVING_MODES = values(ServingMode)
SERVING_SAMPLERS = values(ServingSampler)
