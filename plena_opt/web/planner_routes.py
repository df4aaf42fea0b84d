"""The planner page's API (``/api/planner/…``): the form's choices, a search started as a job,
its progress (with the front so far) and answer, cancel, one plan's breakdown, the plan with one
knob changed (``reestimate``) and its launch bundle (zip).

Requests are bounded like the CLI's flags (:mod:`plena_opt.web.limits`, ``plena_opt.api.limits``)
and validated by ``plena_opt.api.planner`` (HTTP 422 naming the field, the CLI's message); an
unknown job or plan is 404; a start while ``MAX_PLANNER_JOBS`` searches run is 503. Times in ms
(progress and elapsed times in seconds).
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from fastapi import FastAPI, Query, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator

from plena_opt.api.limits import MAX_BATCH_SIZES, MAX_PATH_CHARS
from plena_opt.bounds import MAX_SPECULATIVE_TOKENS
from plena_opt.web import limits
from plena_opt.web.service.planner import Job, PlannerJobs

#: Planner searches running at once (each is one thread of Optuna trials).
MAX_PLANNER_JOBS = 2
#: Finished planner jobs kept for the page to reattach to.
KEPT_PLANNER_JOBS = 16
#: Objectives one search may name (there are seven).
MAX_OBJECTIVES = 8
#: Characters of a ``--batch-sizes`` list (64 sizes of up to 8 digits, commas: MAX_BATCH is 2**24).
MAX_BATCH_TEXT = 9 * MAX_BATCH_SIZES
#: Characters of a job id (16 hex digits are made).
MAX_JOB_CHARS = 64

#: A Hugging Face model id, ``owner/name`` (no ``.json`` file name).
HF_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*(?<!\.json)")

Name = Field(min_length=1, max_length=limits.MAX_NAME_CHARS)


class PlannerIn(BaseModel):
    """A planner search as the form states it (the ``plena-opt search`` flags of the same
    names; ``model_document``: an uploaded HF ``config.json`` instead of ``model``)."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field("llama-3.1-8b", min_length=1, max_length=limits.MAX_NAME_CHARS)
    model_document: dict[str, Any] | None = None
    model_name: str | None = Field(None, max_length=limits.MAX_NAME_CHARS)
    # a folder on the machine running the UI holding config.json (``--model-path DIR``)
    model_dir: str | None = Field(None, max_length=MAX_PATH_CHARS)
    # an uploaded NoC profile (``--noc FILE``'s JSON), at most MAX_DEVICES devices
    noc_document: dict[str, Any] | None = None
    noc_name: str | None = Field(None, max_length=limits.MAX_NAME_CHARS)
    engine_model: str | None = Field(None, max_length=limits.MAX_NAME_CHARS)
    chip: str = Field("h200-sxm", min_length=1, max_length=limits.MAX_NAME_CHARS)
    noc: str = Field("hgx-h200x8", min_length=1, max_length=limits.MAX_NAME_CHARS)
    devices: int | None = Field(None, le=limits.MAX_DEGREE)
    gpus_per_node: int = Field(8, ge=1, le=1024)
    input_seq: int = Field(2048, le=limits.MAX_INPUT_SEQ)
    output_seq: int = Field(1024, le=limits.MAX_OUTPUT_SEQ)
    batch_sizes: str | None = Field(None, max_length=MAX_BATCH_TEXT)
    concurrency: int | None = None  # 1..MAX_CONCURRENCY, checked as the CLI checks it
    request_rate: float | None = None  # requests/s, (0, MAX_REQUEST_RATE]; not with concurrency
    engine: str | None = Field(None, max_length=limits.MAX_NAME_CHARS)
    # the kernel of an MXFP4 checkpoint's experts under the engine (``--moe-kernel``; None: the
    # engine's default, ``chip.gpu.moe_kernels``)
    moe_kernel: str | None = Field(None, max_length=limits.MAX_NAME_CHARS)
    # given: the search runs under the workload and judges the SLAs at this percentile
    # (``search --percentile``); None: the workload prices only the plan view
    percentile: Literal["p50", "p90", "p99"] | None = None
    # the KV pool's share of GPU memory the plan view, the search under load and the bundle use
    # (``estimate``/``search``/``export --memory-fraction``; (0, 1], checked as the CLI checks it)
    memory_fraction: float | None = None
    # the engine version (``--engine-version``: the one modelled, else refused), each request's
    # lengths within ±range_ratio of input_seq/output_seq (``--range-ratio``, 0 <= R < 1); both
    # price the plan view's load, and the search's under a percentile
    engine_version: str | None = Field(None, max_length=limits.MAX_NAME_CHARS)
    range_ratio: float | None = None
    # speculative decoding of the plan view under load (``estimate --speculative K
    # --speculative-method --acceptance``; 1..MAX_SPECULATIVE_TOKENS, checked as the CLI checks
    # it); ``plena-opt search`` has no such flag, so the search is priced without it
    speculative: int | None = None
    speculative_method: str | None = Field(None, max_length=limits.MAX_NAME_CHARS)
    acceptance: list[float] | None = Field(None, max_length=MAX_SPECULATIVE_TOKENS)
    # MoE routing (``--routing``: a built-in mode; a trace path is the CLI's only), the KV cache
    # format (``--kv-precision``) and EPLB's redundant experts (``--eplb-redundant``)
    routing: str | None = Field(None, max_length=limits.MAX_NAME_CHARS)
    kv_precision: str | None = Field(None, max_length=limits.MAX_NAME_CHARS)
    eplb_redundant: int | None = None  # 0..65,536, checked as the CLI checks it (ProblemSpec)
    # the analytic model's knobs (PLENA chips; a GPU chip's pricing reads none): the LM head
    # (``--include-lm-head``), the compute/DRAM overlap policy (``--overlap``) and the clock, Hz
    # (``--frequency-hz``; its range is the library's, checked as the CLI checks it)
    include_lm_head: bool | None = None
    overlap: str | None = Field(None, max_length=limits.MAX_NAME_CHARS)
    frequency_hz: float | None = None
    max_ttft_ms: float | None = None
    max_tpot_ms: float | None = None
    objectives: list[str] = Field(
        default_factory=lambda: ["ttft", "tps"], min_length=1, max_length=MAX_OBJECTIVES
    )
    precision: str | None = Field(None, max_length=limits.MAX_NAME_CHARS)
    serving: Literal["aggregated", "disaggregated", "both"] = "both"
    sampler: Literal["auto", "tpe", "nsga2", "gp", "exhaustive"] = "auto"
    trials: int = Field(200, le=limits.MAX_TRIALS)
    seed: int | None = Field(None, lt=2**32)

    @field_validator("model", "chip", "noc", "precision", "kv_precision")
    @classmethod
    def _built_in(cls, v: str | None, info: Any) -> str | None:
        """Shipped names only: a path would let a request read the server's files (the
        uploaded ``config.json`` comes as ``model_document``). ``model`` may also be a Hugging
        Face id ``owner/name`` (``--model nvidia/Qwen3-32B-NVFP4``): it resolves by the catalog
        only (``load_model(name=...)`` never reads a path), as the CLI and gRPC take it."""
        if v is None or (info.field_name == "model" and HF_ID.fullmatch(v) and ".." not in v):
            return v
        if "/" in v or "\\" in v or v.endswith(".json"):
            raise ValueError(f"give a built-in {info.field_name} name, not a path")
        return v


class KnobsIn(BaseModel):
    """One knob of an opened plan changed (``plena_opt.api.plan_knobs``; ranges checked there
    with the CLI's messages): the global batch, tp, precision, or the load (concurrency clients
    or request_rate requests/s)."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=limits.MAX_NAME_CHARS)
    batch_size: int | None = None
    tp: int | None = None
    precision: str | None = Field(None, max_length=limits.MAX_NAME_CHARS)
    concurrency: int | None = None
    request_rate: float | None = None


#: Uploaded documents kept off the job view (the page has them).
DOCUMENTS = ("model_document", "noc_document")


def finite(x: Any) -> Any:
    """``x`` with every non-finite float as None (strict JSON)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [finite(v) for v in x]
    return x


def job_view(job: Job) -> dict[str, Any]:
    """What the page shows of a job: state, progress, and the answer once finished."""
    out: dict[str, Any] = {
        "id": job.id,
        "state": job.state,
        "fields": {k: v for k, v in job.fields.items() if k not in DOCUMENTS},
        "uploaded": job.fields.get("model_document") is not None,
        "model_dir": job.fields.get("model_dir"),
        "noc_uploaded": job.fields.get("noc_document") is not None,
        "command": job.search.command,
        "note": job.search.note,
        "progress": job.progress,
        "elapsed_s": job.elapsed_s,
        "stopped_after_s": job.stopped_after_s,
        "error": job.error,
        "answer": None,
    }
    a = job.answer
    if a is not None:
        from plena_opt.api.planner_intervals import goodput_doc, recommendation_doc

        r = a.result
        cmp = (r.serving or {}).get("comparison") or {}
        out["answer"] = {
            "points": a.points,
            "recommendation": recommendation_doc(a.recommendation, r),
            "summary": {
                "evaluated": r.evaluated,
                "legal_points": r.legal_points,
                "front_size": len(r.front),
                "hypervolume": r.hypervolume,
                "partial": r.partial,
                "stop_reason": r.stop_reason,
                "sampler": r.sampler,
                "verdict": cmp.get("verdict"),
                "empty_reason": getattr(r, "empty_reason", None),
                "infeasible": r.infeasible,
                "under_load": getattr(r, "under_load", None),
                "goodput_interval": goodput_doc(r, job.search.request),
                "warnings": list(r.warnings),  # as the CLI prints them (``warning: …``)
            },
        }
    return finite(out)


def check_sources(req: PlannerIn) -> None:
    """One model source (``model``, ``model_document``, ``model_dir``) and one cluster (``noc``,
    ``noc_document``), as the CLI takes ``--model`` or ``--model-path``, not both."""
    from plena_opt.errors import PlenaInputError

    given = req.model_fields_set
    models = [k for k in ("model", "model_document", "model_dir") if k in given]
    models = [k for k in models if getattr(req, k) is not None]
    if len(models) > 1:
        raise PlenaInputError(models[-1], f"give one of {', '.join(models)}, not both")
    if req.noc_document is not None and "noc" in given:
        raise PlenaInputError("noc_document", "give noc or noc_document, not both")


def add_planner_routes(app: FastAPI) -> PlannerJobs:
    """Add ``/api/planner/…`` to ``app``; the job table it uses."""
    jobs = PlannerJobs(MAX_PLANNER_JOBS, KEPT_PLANNER_JOBS)

    def check_id(job: str) -> str:
        if len(job) > MAX_JOB_CHARS:
            from plena_opt.errors import PlenaInputError

            raise PlenaInputError("job", f"job: at most {MAX_JOB_CHARS} characters")
        return job

    @app.get("/api/planner/catalog")
    def planner_catalog() -> dict:
        from plena_opt.api.planner import planner_catalog as choices

        return choices()

    @app.post("/api/planner/jobs")
    def start(req: PlannerIn) -> dict:
        check_sources(req)
        fields = req.model_dump(exclude_none=True)
        if req.model_document is not None or req.model_dir is not None:
            fields.pop("model", None)
        if req.noc_document is not None:
            fields.pop("noc", None)
        return job_view(jobs.start(fields))

    @app.get("/api/planner/jobs/{job}")
    def status(job: str) -> dict:
        return job_view(jobs.get(check_id(job)))

    @app.post("/api/planner/jobs/{job}/cancel")
    def cancel(job: str) -> dict:
        return job_view(jobs.cancel(check_id(job)))

    @app.get("/api/planner/jobs/{job}/plan")
    def plan(job: str, key: str = Query(..., max_length=limits.MAX_NAME_CHARS)) -> dict:
        return finite(jobs.detail(check_id(job), key))

    @app.post("/api/planner/jobs/{job}/reestimate")
    def reestimate(job: str, req: KnobsIn) -> dict:
        return finite(jobs.reestimate(check_id(job), req.model_dump()))

    @app.get("/api/planner/jobs/{job}/bundle")
    def bundle(job: str, key: str = Query(..., max_length=limits.MAX_NAME_CHARS)) -> Response:
        data = jobs.bundle_zip(check_id(job), key)
        name = "plena-bundle-" + "".join(c if c.isalnum() or c in "-_" else "_" for c in key)
        return Response(
            data,
            media_type="application/zip",
            headers={"Content-Disposition": f'attachment; filename="{name[:120]}.zip"'},
        )

    return jobs
