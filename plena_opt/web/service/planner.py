"""The planner page's searches as background jobs: start (validated first, through
``plena_opt.api.planner``), live progress, cancel, the finished answer, one plan's breakdown and
its launch bundle as a zip.

A job runs in its own thread; ``cancel`` raises its ``StopToken``, which the search polls between
trials and batches and the serving comparison between workers (the page sees the job stop well
within a second: ``stopped_after_s``). At most ``max_running`` jobs run at once (another is
refused busy, HTTP 503); the newest ``keep`` jobs are kept for the page to reattach to (older
finished ones are dropped). Times in seconds unless named ``_ms``.
"""

from __future__ import annotations

import io
import secrets
import threading
import time
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from plena_opt.api.limits import LimitError
from plena_opt.errors import PlenaInputError, PlenaNotFoundError


@dataclass
class Job:
    """One planner search: its fields, validated search, stop token, progress and answer."""

    id: str
    fields: dict[str, Any]
    search: Any  # api.planner.PlannerSearch
    stop: Any  # plena_opt.stop.StopToken
    started: float = field(default_factory=time.monotonic)
    state: str = "running"  # running, done, cancelled, failed
    progress: dict[str, Any] = field(default_factory=dict)
    answer: Any = None  # api.planner.PlannerResult
    error: str | None = None
    cancelled_at: float | None = None
    stopped_after_s: float | None = None
    elapsed_s: float | None = None
    thread: threading.Thread | None = None


class PlannerJobs:
    """The running and recent planner searches of one app."""

    def __init__(self, max_running: int = 2, keep: int = 16) -> None:
        self.max_running, self.keep = max_running, keep
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()

    def start(self, fields: dict[str, Any]) -> Job:
        """Validate ``fields`` (``PlenaInputError`` naming the field) and start the search."""
        from plena_opt.api.planner import planner_search
        from plena_opt.stop import StopToken

        ps = planner_search(fields)
        with self._lock:
            running = sum(j.state == "running" for j in self._jobs.values())
            if running >= self.max_running:
                raise LimitError(
                    "planner", f"{running} planner searches are running; retry later", busy=True
                )
            job = Job(secrets.token_hex(8), dict(fields), ps, StopToken())
            self._jobs[job.id] = job
            self._trim()
        job.thread = threading.Thread(target=self._run, args=(job,), daemon=True)
        job.thread.start()
        return job

    def _trim(self) -> None:
        done = [k for k, j in self._jobs.items() if j.state != "running"]
        while len(self._jobs) > self.keep and done:
            self._jobs.pop(done.pop(0))

    def _run(self, job: Job) -> None:
        from plena_opt.api.planner import live_points, run_planner

        def report(p: Any) -> None:
            job.progress = {
                "stage": p.stage,
                "done": p.done,
                "total": p.total,
                "front_size": p.front_size,
                "hypervolume": p.hypervolume,
                "trials_per_s": p.trials_per_s,
                "front": live_points(p, job.search),  # the front as it grows (bounded)
            }

        try:
            job.answer = run_planner(job.search, job.stop, report)
            job.state = "cancelled" if job.stop.is_set() else "done"
        except (PlenaInputError, ValueError) as exc:
            job.state, job.error = "failed", str(exc)
        except Exception as exc:  # noqa: BLE001 - a job's failure is shown, never lost
            job.state, job.error = "failed", f"{type(exc).__name__}: {exc}"
        end = time.monotonic()
        job.elapsed_s = end - job.started
        if job.cancelled_at is not None:
            job.stopped_after_s = end - job.cancelled_at

    def get(self, job_id: str) -> Job:
        """The job, or ``PlenaNotFoundError`` (field ``job``; HTTP 404)."""
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise PlenaNotFoundError(
                "job", f"job {job_id[:64]!r} is not running or kept here (start the search again)"
            )
        return job

    def cancel(self, job_id: str) -> Job:
        """Raise the job's stop token (a finished job stays as it is)."""
        job = self.get(job_id)
        if job.state == "running" and job.cancelled_at is None:
            job.cancelled_at = time.monotonic()
            job.stop.set("cancelled")
        return job

    def plan_keys(self, job: Job) -> set[str]:
        return {p["key"] for p in (job.answer.points if job.answer else [])}

    def _known(self, job_id: str, key: str) -> Job:
        from plena_opt.api.plan_detail import check_key

        check_key(key)
        job = self.get(job_id)
        if key not in self.plan_keys(job):
            raise PlenaNotFoundError("key", f"plan {key[:64]!r} is not a plan of job {job.id}")
        return job

    def detail(self, job_id: str, key: str) -> dict[str, Any]:
        """One plan's breakdown (``api.plan_detail``), under the job's engine and concurrency."""
        from plena_opt.api.plan_detail import plan_detail

        job = self._known(job_id, key)
        f = job.fields
        spec = job.search.request.problem
        load = (f.get("concurrency"), f.get("request_rate"))
        extras = job.search.extras
        return plan_detail(
            spec, key, f.get("engine"), *load, f.get("memory_fraction"), extras
        ).to_dict()

    def reestimate(self, job_id: str, knobs: dict[str, Any]) -> dict[str, Any]:
        """A plan of the job with one knob changed (``api.plan_knobs``), without a new search."""
        from plena_opt.api.plan_knobs import KnobChange, reestimate

        key = str(knobs["key"])
        job = self._known(job_id, key)
        f = job.fields
        change = KnobChange(**{k: knobs.get(k) for k in KnobChange.__dataclass_fields__})
        noc = job.search.problem.noc
        load = (f.get("concurrency"), f.get("request_rate"))
        r = reestimate(
            job.search.request.problem,
            key,
            change,
            f.get("engine"),
            load,
            (noc.num_devices, noc.name),
            f.get("memory_fraction"),
            job.search.extras,
        )
        return r.to_dict()

    def bundle_zip(self, job_id: str, key: str) -> bytes:
        """The launch bundle of ``key`` (the files of ``plena-opt export``) as a zip."""
        from plena_opt.api import engine_model, names_gpu_chip
        from plena_opt.api.plan_detail import bundle_files

        job = self._known(job_id, key)
        f = job.fields
        uploaded = f.get("model_document") is not None or f.get("model_dir") is not None
        model = f.get("engine_model") or engine_model(
            None if uploaded else f.get("model"), f.get("model_dir")
        )
        chip = f.get("chip")
        gpu = chip if isinstance(chip, str) and names_gpu_chip(chip) else None
        files = bundle_files(
            key,
            model,
            int(f.get("input_seq", 2048)),
            int(f.get("output_seq", 1024)),
            catalog_model=None if uploaded else f.get("model"),
            gpu=gpu,
            precision=f.get("precision") or None,
            gpus_per_node=int(f.get("gpus_per_node") or 8),
            memory_fraction=f.get("memory_fraction"),
            moe_kernel=f.get("moe_kernel") or None,
        )
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            for name, text in files.items():
                z.writestr(f"plena-bundle/{name}", text)
        return buf.getvalue()
