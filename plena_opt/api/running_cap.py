"""The running cap a plan has under a workload: one rule for ``estimate``, ``search`` and the
disaggregated decode pool (issue 23; ``validate`` applies the same KV rule at each engine's default
memory setting, ``serving.kv_admission.admitted``).

``max_running`` = min(the engine's default, the plan's batch as its launch files cap it
(``api.load_cap``), the requests whose KV cache one DP replica's pool holds at once
(``serving.kv_admission``: vLLM and SGLang; TensorRT-LLM's admission is not priced, the reason in
that module, and its text says so where its whole-sequence pool would bind)). The clients above
the cap wait in the engine's queue and their wait is in TTFT (``serving.steady.closed_loop``).

The pool is priced at the memory setting the launch files write: ``plena-opt export`` writes
``--memory-fraction`` (default ``EXPORTED_MEMORY_FRACTION``) as vLLM's
``--gpu-memory-utilization``, SGLang's ``--mem-fraction-static`` and TensorRT-LLM's
``--kv_cache_free_gpu_memory_fraction`` (``export.engines``); for vLLM and TensorRT-LLM that is
their own default, for SGLang it replaces the default by TP (``tests/export/test_running_cap.py``
checks the exported flag is the priced setting).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from plena_opt.errors import PlenaInputError
from plena_opt.estimate.capacity import DEFAULT_MEMORY_FRACTION

if TYPE_CHECKING:
    from plena_opt.estimate.plan import Plan
    from plena_opt.estimate.problem import EvaluatorInputs
    from plena_opt.serving import EngineModel
    from plena_opt.serving.kv_admission import KvCap

# ``ExportSpec.memory_fraction``'s default (``export --memory-fraction``; ``search --export-dir``
# writes ``--memory-fraction`` or this): the memory setting every exported engine starts with.
EXPORTED_MEMORY_FRACTION = DEFAULT_MEMORY_FRACTION


def check_memory_fraction(value: float | None) -> float | None:
    """``value`` (None: the exported default) if it is a share of GPU memory in
    (0, ``MAX_MEMORY_FRACTION``]; else raise naming ``memory_fraction`` (``--memory-fraction``,
    the rule ``search --memory-fraction`` and ``export --memory-fraction`` apply)."""
    from plena_opt.bounds import MAX_MEMORY_FRACTION

    if value is None:
        return None
    if not isinstance(value, int | float) or not 0 < value <= MAX_MEMORY_FRACTION:
        raise PlenaInputError(
            "memory_fraction",
            f"--memory-fraction must be above 0 and at most {MAX_MEMORY_FRACTION:g} (the KV "
            f"pool's share of GPU memory), got {value!r}",
        )
    return float(value)


def replica_parts(problem: EvaluatorInputs, plan: Plan) -> tuple[tuple, Plan]:
    """((model, NoC, memory, chip, Workload) of one DP replica of ``plan``, its plan)."""
    one = replace(plan, dp=1)
    noc = problem.noc
    if plan.dp > 1:
        from plena_opt.estimate.disaggregated import sub_noc

        noc = sub_noc(noc, one.world_size)  # type: ignore[arg-type]
    wl = replace(problem.workload, batch_size=1)
    return (problem.model, noc, problem.memory, problem.chip, wl), one


def replica_kv_cap(problem: EvaluatorInputs, plan: Plan, eng: EngineModel,
                   memory_fraction: float | None = None) -> KvCap | None:  # fmt: skip
    """The requests one DP replica's KV pool holds (``serving.kv_admission.kv_cap``) at the
    exported memory setting (None: ``EXPORTED_MEMORY_FRACTION``), whatever the engine."""
    from plena_opt.serving.kv_admission import kv_cap

    parts, one = replica_parts(problem, plan)
    frac = EXPORTED_MEMORY_FRACTION if memory_fraction is None else memory_fraction
    return kv_cap(*parts, one, eng.name, eng.budget_tokens, frac)  # type: ignore[misc]


def plan_running_cap(
    problem: EvaluatorInputs,
    plan: Plan,
    eng: EngineModel,
    batch: int | None,
    memory_fraction: float | None = None,
    explain: bool = True,
) -> tuple[EngineModel, str]:
    """(``eng`` with the plan's running cap per DP replica, where the cap came from in words).
    ``problem``: the plan's inputs and workload (its lengths); ``batch``: the plan's global batch
    (None: no batch cap, ``api.load_cap``); ``memory_fraction``: the exported memory setting
    (None: ``EXPORTED_MEMORY_FRACTION``); ``explain``: price TensorRT-LLM's pool too, to say when
    its unpriced whole-sequence admission would bind and to refuse a pool that holds none (one
    more pool computation). Raises naming ``plan`` when the pool holds no request (the exported
    engine would not start)."""
    from plena_opt.api.load_cap import capped_engine
    from plena_opt.serving.kv_admission import KV_CAPPED_ENGINES

    capped, source = capped_engine(eng, eng.name, plan, batch)
    if eng.name not in KV_CAPPED_ENGINES and not explain:
        return capped, source
    cap = replica_kv_cap(problem, plan, eng, memory_fraction)
    return pool_capped(problem, capped, source, cap)


def pool_capped(problem: EvaluatorInputs, eng: EngineModel, source: str, cap: KvCap | None
                ) -> tuple[EngineModel, str]:  # fmt: skip
    """(``eng``, capped by the plan's batch as ``source`` says, with the running cap of the
    pool ``cap`` where it binds (vLLM, SGLang; TensorRT-LLM: said, not priced), where the cap
    came from). Raises naming ``plan`` when the pool holds no request, whatever the engine."""
    from plena_opt.serving.kv_admission import KV_CAPPED_ENGINES, binds

    if cap is not None and cap.requests < 1:
        raise PlenaInputError("plan", no_room(cap, problem))
    wl = problem.workload
    if cap is None:
        return eng, source
    said = cap.describe(wl.input_seq_len, wl.output_seq_len)
    if not binds(cap, eng):  # the pool's room beside the cap in force
        return eng, f"{source}; {said.removeprefix('the KV cache: ')}"
    if eng.name in KV_CAPPED_ENGINES:
        return replace(eng, max_running=cap.requests), said
    return (
        eng,
        f"{source}; not {said}: {eng.name}'s KV admission is not priced (serving.kv_admission)",
    )


def plan_engine(problem: EvaluatorInputs, plan: Plan, engine: str, batch: int | None,
                memory_fraction: float | None = None) -> tuple[EngineModel, str]:  # fmt: skip
    """``engine``'s default scheduler on the problem's GPU chip (a ``--calibration`` overlay in
    force applied) with ``plan_running_cap``'s cap, and where that cap came from."""
    from plena_opt.serving import engine_model
    from plena_opt.serving.calibration import calibrated

    hbm = float(problem.chip.hbm.capacity_bytes.value)  # type: ignore[union-attr]
    eng, source = plan_running_cap(problem, plan, engine_model(engine, hbm), batch,
                                   memory_fraction)  # fmt: skip
    return calibrated(eng, problem.chip.name), source  # type: ignore[union-attr]


def no_room(cap: KvCap, problem: EvaluatorInputs) -> str:
    """Why a plan does not serve: its engine's pool holds no request of the workload."""
    wl = problem.workload
    said = cap.describe(wl.input_seq_len, wl.output_seq_len).removeprefix("the KV cache: ")
    return (
        f"{said}: the {cap.engine} KV pool left after the weights holds no request, so the "
        "engine does not start; give each replica more devices or a smaller format"
    )


@dataclass(frozen=True)
class LoadMemory:
    """One device of a plan's fullest stage under load as its engine holds it, bytes:
    ``weight_bytes`` of weights and ``kv_bytes``, the KV cache of the requests it runs at once
    (``running`` per DP replica: its clients, at most its running cap and what its pool holds,
    each at its mean held tokens, ``serving.kv_admission``), in a pool of ``pool_bytes`` per
    device at the memory setting ``fraction`` (the one the launch files write). The rest of the
    clients wait in the engine's queue (their wait is in TTFT), so a plan whose pool holds one
    request fits; one whose pool holds none is refused naming ``plan`` (``plan_running_cap``)."""

    weight_bytes: float
    kv_bytes: float
    pool_bytes: float
    running: int
    fraction: float
    pool_requests: int = 0  # requests one replica's pool holds at once


def load_memory(cap: KvCap, eng: EngineModel, clients: int | None, plan: Plan) -> LoadMemory:
    """``LoadMemory`` of one DP replica of ``plan`` (its ``cap``, the running-capped ``eng``)
    with ``clients`` requests in it (None, a request rate: as many as its cap runs)."""
    running = cap.requests
    for bound in (eng.max_running, clients):
        running = running if bound is None else min(running, bound)
    slots = max(1, plan.ep * plan.pp)  # devices of one replica that hold different requests
    per_device = min(cap.requests // slots, -(-running // slots))
    frac = EXPORTED_MEMORY_FRACTION if cap.fraction is None else cap.fraction
    return LoadMemory(cap.weight_bytes, per_device * cap.request_bytes, cap.pool_bytes, running,
                      frac, cap.requests)  # fmt: skip


def memo_admission(memo: dict, problem: EvaluatorInputs, plan: Plan, eng: EngineModel,
                   batch: int | None, memory_fraction: float | None = None
                   ) -> tuple[EngineModel, KvCap | None]:  # fmt: skip
    """(``plan_running_cap``'s engine, one replica's ``replica_kv_cap``), kept in ``memo`` by
    the plan, lengths, formats and batch (a search prices each plan once per batch; the pool
    does not depend on the rest). A pool that holds no request raises naming ``plan``."""
    wl = problem.workload
    key = ("admission", plan, wl.input_seq_len, wl.output_seq_len, wl.precision,
           wl.kv_precision, batch, eng)  # fmt: skip
    if key not in memo:
        from plena_opt.api.load_cap import capped_engine

        try:
            cap = replica_kv_cap(problem, plan, eng, memory_fraction)
            capped = pool_capped(problem, *capped_engine(eng, eng.name, plan, batch), cap)[0]
            memo[key] = (capped, cap)
        except PlenaInputError as exc:
            memo[key] = exc
    got = memo[key]
    if isinstance(got, PlenaInputError):
        raise PlenaInputError(got.field, got.rule)
    return got
