"""The running cap a plan under load is priced with: the engine's default, or the share of the
plan's batch its launch files give one DP replica (``export.engines.running_cap``), whichever is
lower (issue 23: the exported engine queues the clients above it)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plena_opt.estimate.plan import Plan
    from plena_opt.serving import EngineModel

ENGINE_DEFAULT = "the engine's default"
KV_BOUND = "bounded only by the KV cache, the engine's default"


def capped_engine(
    eng: EngineModel, engine: str, plan: Plan, batch: int | None
) -> tuple[EngineModel, str]:
    """(``eng`` with ``max_running`` = min(default, one replica's share of ``batch``), where the
    cap came from). ``batch``: the plan's global batch (sequences, checked with the workload it
    came from); None keeps the default."""
    from plena_opt.export.engines import RUNNING_CAP_FLAG, running_cap

    default = ENGINE_DEFAULT if eng.max_running is not None else KV_BOUND
    if batch is None:
        return eng, default
    share = running_cap(engine, plan, batch)
    if eng.max_running is not None and eng.max_running <= share:
        return eng, default
    source = f"the plan's batch: {RUNNING_CAP_FLAG[engine]} in its launch files"
    return replace(eng, max_running=share), source
