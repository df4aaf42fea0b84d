"""Use case: one plan of a planner search understood, and taken away (``plena-opt ui``).

``plan_detail(spec, key, engine, concurrency)`` prices a plan key (``tp8-…-b16`` or a
disaggregated ``2P:KEY+3D:KEY``) pool by pool: where a step's time goes (compute, HBM, network per
pipeline stage of prefill and of one decode step, and the decode attribution of the CLI's
``estimate``), memory per device (weights, KV cache, the rest) against capacity, and, for a GPU
chip with an engine and a concurrency, TTFT/TPOT under load (``serve_under_load``) with the
measured error's interval of their means (``error_bars``, as ``estimate --concurrency``), at
the engine version and lengths' range ratio of ``LoadExtras`` and with its speculative verdict
(``estimate --engine-version --range-ratio --speculative``).
``bundle_files`` is the launch bundle ``plena-opt export KEY --out-dir DIR`` writes, as
file name → text. Times in ms, memory in bytes.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plena_opt.errors import PlenaInputError

if TYPE_CHECKING:
    from plena_opt.estimate.problem import ProblemSpec

#: Longest plan key accepted (a deployment key is two point keys and the worker counts).
MAX_KEY_CHARS = 200


@dataclass(frozen=True)
class LoadExtras:
    """What a plan under load is priced with besides the workload (``estimate``'s flags of the
    same names, checked): the engine version (None: the one modelled), each request's lengths
    drawn within ±``range_ratio`` (0: fixed), a speculative setting (``Speculation``; None:
    none)."""

    engine_version: str | None = None
    range_ratio: float = 0.0
    speculation: Any = None


#: A plan under load with the workload alone.
NO_EXTRAS = LoadExtras()


@dataclass(frozen=True)
class StageTime:
    """One pipeline stage of a phase: compute, HBM (memory) and network time, ms."""

    stage: int
    compute_ms: float
    hbm_ms: float
    network_ms: float
    total_ms: float


@dataclass(frozen=True)
class PoolDetail:
    """One pool of a deployment (``role`` plan, prefill or decode; ``workers`` replicas)."""

    role: str
    workers: int
    key: str
    label: str
    devices: int
    ttft_ms: float
    tpot_ms: float
    tps: float
    prefill: list[StageTime]
    decode: list[StageTime]
    decode_attribution_ms: dict[str, float]
    weight_bytes: float
    kv_bytes: float
    capacity_bytes: float | None
    fits: bool | None
    under_load: dict[str, Any] | None = None
    under_load_note: str | None = None


@dataclass(frozen=True)
class PlanDetail:
    """A plan or deployment, pool by pool (what the page's plan view shows)."""

    key: str
    disaggregated: bool
    pools: list[PoolDetail] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_key(key: str) -> None:
    """Refuse a key above :data:`MAX_KEY_CHARS` before parsing it (field ``key``)."""
    if len(key) > MAX_KEY_CHARS:
        raise PlenaInputError("key", f"key: at most {MAX_KEY_CHARS} characters")


def _stages(phase: dict[str, Any]) -> list[StageTime]:
    out = []
    for s in phase.get("stages", []):
        comm = sum(float(v) for v in (s.get("comm_seconds") or {}).values())
        out.append(
            StageTime(
                int(s["stage"]),
                float(s["compute_seconds"]) * 1e3,
                float(s["memory_seconds"]) * 1e3,
                comm * 1e3,
                float(s["seconds"]) * 1e3,
            )
        )
    return out


def _pool(
    spec: ProblemSpec,
    role: str,
    workers: int,
    key: str,
    engine: str | None,
    concurrency: int | None,
    request_rate: float | None = None,
    memory_fraction: float | None = None,
    extras: LoadExtras | None = None,
) -> PoolDetail:
    from plena_opt.api.estimates import estimate_plan
    from plena_opt.export.launch import parse_point_key
    from plena_opt.search.space.space import Point

    plan, batch, precision = parse_point_key(key)
    update: dict[str, Any] = {"batch_size": batch, "devices": plan.world_size}
    if engine:  # the engine's MoE kernels price the static plan too
        update["engine"] = engine
    if precision is not None:
        update["precision"] = precision
    problem = spec.model_copy(update=update).load()
    est = estimate_plan(problem, plan)
    doc, m = est.document, est.metrics
    assert m is not None
    ftd = doc.get("first_token_decode") or {}
    attribution = {
        k: float(v) * 1e3 for k, v in (doc.get("decode_attribution_seconds") or {}).items()
    }
    load, note = None, None
    loaded = bool(engine) and (concurrency is not None or request_rate is not None)
    if loaded and role == "plan":
        load, note = _under_load(problem, plan, str(engine), (concurrency, request_rate), batch,
                                 memory_fraction, extras)  # fmt: skip
    elif loaded:
        note = "under load: priced for aggregated plans only (a pool of a deployment is not)"
    return PoolDetail(
        role,
        workers,
        key,
        Point(plan, batch, precision).label(),
        plan.world_size,
        float(doc["ttft_seconds"]) * 1e3,
        float(ftd.get("period_seconds", 0.0)) * 1e3,
        float(doc["tps"]),
        _stages(doc.get("prefill") or {}),
        _stages(ftd),
        attribution,
        float(doc["weight_bytes_per_device"]),
        float(doc["kv_cache_bytes_per_device"]),
        None if doc.get("memory_capacity_bytes") is None else float(doc["memory_capacity_bytes"]),
        doc.get("fits_in_memory"),
        load,
        note,
    )


def _under_load(
    problem: Any,
    plan: Any,
    engine: str,
    load: tuple[int | None, float | None],
    batch: int,
    memory_fraction: float | None = None,
    extras: LoadExtras | None = None,
) -> tuple[dict | None, str | None]:
    """TTFT/TPOT of the plan under ``concurrency`` clients (closed loop) or ``request_rate``
    requests/s (open loop) of ``engine`` (ms), its engine capped at the plan's ``batch`` as its
    launch files cap it and its KV pool at ``memory_fraction`` (None: the exported 0.9), at
    ``extras``' version and range ratio with its speculative verdict, or why not."""
    concurrency, request_rate = load
    extras = extras or NO_EXTRAS
    from plena_opt.api.running_cap import EXPORTED_MEMORY_FRACTION
    from plena_opt.api.under_load import serve_under_load

    try:
        u = serve_under_load(
            problem, plan, engine, concurrency, request_rate, extras.engine_version,
            extras.range_ratio, batch, memory_fraction,
        )  # fmt: skip
    except PlenaInputError as exc:
        return None, str(exc)
    ms = {k: v * 1e3 for k, v in u.ttft.to_dict().items()}
    return {
        "engine": u.engine,
        "engine_version": u.engine_version,
        "concurrency": concurrency,
        "request_rate": request_rate,
        "range_ratio": u.range_ratio,
        "max_running_requests": u.max_running,
        "max_running_source": u.max_running_source,
        "memory_fraction": memory_fraction or EXPORTED_MEMORY_FRACTION,
        "host_step_seconds": u.host_step_seconds,  # a --calibration overlay's where in force
        "ttft_ms": ms,
        "tpot_ms": {k: v * 1e3 for k, v in u.tpot.to_dict().items()},
        "output_tps_per_gpu": u.output_tps_per_gpu,
        "output_tps_per_user": u.output_tps_per_user,
        "error_bars": _bars_ms(u),
        **_speculative_ms(problem, plan, u, engine, extras.speculation),
    }, None


def _speculative_ms(problem: Any, plan: Any, u: Any, engine: str, spec: Any) -> dict[str, Any]:
    """``speculative``: the verdict of ``estimate --speculative`` (``api.speculative``) with its
    times in ms, or ``speculative_note``: why it is not priced; nothing without a setting."""
    if spec is None:
        return {}
    from plena_opt.api.speculative import speculate

    try:
        doc = speculate(problem, plan, u, spec, engine).to_dict()
    except PlenaInputError as exc:
        return {"speculative_note": str(exc)}
    ms = {k.replace("_seconds", "") + "_ms": doc.pop(k) * 1e3 for k in _SPEC_SECONDS}
    ms.update({k + "_ms": doc.pop(k) * 1e3 for k in ("tpot_without", "tpot_with")})
    return {"speculative": {**doc, **ms}}


#: The speculative verdict's times (seconds in ``SpeculativeVerdict.to_dict``).
_SPEC_SECONDS = ("decode_step_seconds", "verify_step_seconds", "draft_seconds")


def _bars_ms(u: Any) -> dict[str, Any] | None:
    """The mean TTFT/TPOT interval of ``estimate --concurrency`` (``UnderLoad.error_bars``:
    the closest measured group) in ms (``*_ms_low``/``*_ms_high``), or None: no group."""
    bars = u.error_bars()
    if bars is None:
        return None
    out = {k: bars[k] for k in ("level", "group", "group_rows")}
    for metric in ("ttft", "tpot"):
        for end in ("low", "high"):
            out[f"{metric}_mean_ms_{end}"] = bars[f"{metric}_mean_seconds_{end}"] * 1e3
    return out


def plan_detail(
    spec: ProblemSpec,
    key: str,
    engine: str | None = None,
    concurrency: int | None = None,
    request_rate: float | None = None,
    memory_fraction: float | None = None,
    extras: LoadExtras | None = None,
) -> PlanDetail:
    """The pools of ``key`` priced on ``spec`` (its batch and precision from the key); under
    load at ``concurrency`` clients or ``request_rate`` requests/s, the KV pool at
    ``memory_fraction`` of GPU memory (None: the exported 0.9), with ``extras``."""
    from plena_opt.export.launch import parse_deployment_key

    check_key(key)
    split = parse_deployment_key(key)
    if split is None:
        pool = _pool(spec, "plan", 1, key, engine, concurrency, request_rate, memory_fraction,
                     extras)  # fmt: skip
        return PlanDetail(key, False, [pool])
    x, pkey, y, dkey = split
    pools = [
        _pool(spec, "prefill", x, pkey, None, None),
        _pool(spec, "decode", y, dkey, None, None),
    ]
    return PlanDetail(key, True, pools)


def bundle_files(
    key: str,
    model: str,
    input_len: int,
    output_len: int,
    *,
    catalog_model: str | None = None,
    gpu: str | None = None,
    precision: str | None = None,
    gpus_per_node: int = 8,
    memory_fraction: float | None = None,
    moe_kernel: str | None = None,
) -> dict[str, str]:
    """The files ``plena-opt export KEY --out-dir DIR`` writes (launch scripts, refusals,
    ``launch.json``, ``deployment.json``), name → text; ``model`` the id the engines load;
    ``memory_fraction``: the engines' memory setting (None: 0.9, ``export --memory-fraction``)."""
    from plena_opt.api.exports import export_moe
    from plena_opt.api.running_cap import EXPORTED_MEMORY_FRACTION, check_memory_fraction
    from plena_opt.export import ExportSpec, bundle
    from plena_opt.export.files import write_bundle, write_deployment

    check_key(key)
    spec = ExportSpec(
        model=model,
        input_len=input_len,
        output_len=output_len,
        gpus_per_node=gpus_per_node,
        precision=precision,
        memory_fraction=check_memory_fraction(memory_fraction) or EXPORTED_MEMORY_FRACTION,
        **export_moe(gpu, catalog_model, None, moe_kernel),
    )
    launches = bundle(key, spec)
    with tempfile.TemporaryDirectory(prefix="plena-ui-bundle-") as tmp:
        folder = Path(tmp)
        write_bundle(folder, launches)
        write_deployment(folder, key, spec, launches, catalog_model, gpu)
        return {p.name: p.read_text() for p in sorted(folder.iterdir()) if p.is_file()}
