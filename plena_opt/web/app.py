"""The ASGI app of ``plena-opt ui``: the JSON API under ``/api/`` and the page (``static/``).

Errors: a request that breaks a rule (pydantic validation, or a ``PlenaInputError`` from the
product) is HTTP 422 with ``detail[0].loc`` naming the field and ``field`` = the dotted name; an
unknown study is 404; a body above :data:`~plena_opt.web.limits.MAX_BODY_BYTES` is 413; a
simulation while the running ones hold :data:`~plena_opt.web.limits.MAX_CONCURRENT_SIMULATIONS`
slots or their estimated bytes is 503 with ``Retry-After``. A ``Host`` that is not loopback, the
bound address or an ``--allowed-host`` is 400; a missing or wrong token (``--auth-token-file``)
is 401 (:mod:`plena_opt.web.guard`). The
handlers are plain ``def``: Starlette runs them in its thread pool, so a simulation never blocks
the event loop.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from plena_opt.errors import PlenaInputError, PlenaNotFoundError, clip
from plena_opt.web import guard, limits, schemas, service, views
from plena_opt.web.planner_routes import add_planner_routes

STATIC = Path(__file__).parent / "static"
#: FastAPI's 400 detail for a body its JSON parser raised on (other than a decode error).
_UNPARSED = "There was an error parsing the body"


class _Results:
    """The last few simulations, keyed by their request, for the trace download."""

    def __init__(self, size: int) -> None:
        self.size, self._d, self._lock = size, OrderedDict(), threading.Lock()

    def get(self, key: str) -> service.SimRun | None:
        with self._lock:
            run = self._d.get(key)
            if run is not None:
                self._d.move_to_end(key)
            return run

    def put(self, key: str, run: service.SimRun) -> None:
        with self._lock:
            self._d[key] = run
            self._d.move_to_end(key)
            while len(self._d) > self.size:
                self._d.popitem(last=False)


def _key(req: schemas.SimulateIn) -> str:
    data = schemas.SimulateIn.model_validate(req.model_dump(exclude={"sample"}))
    text = json.dumps(data.model_dump(), sort_keys=True, allow_nan=True)  # NaN is not null here
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _work(req: schemas.SimulateIn) -> tuple[object, int]:
    """The request's validated noise and the estimated bytes of its simulation (the gRPC
    server's estimator); 422 naming ``samples`` (or the noise field) above a bound."""
    noise = service.check_noise(req.noise)
    if req.mode == "training":
        t = req.training
        n_ops = t.pp * t.vpp * t.microbatches * (3 if t.schedule == "zb-h1" else 2)
        limits.check_op_samples(n_ops, req.samples)
        service.check_training_size(t.pp, t.vpp, t.microbatches, limits.MAX_OPS)
    else:
        s = req.serving
        n_ops = min(s.batch_size, s.pp) * s.pp * (s.max_window_steps + 2) * 3  # m <= batch
    return noise, limits.check_work(n_ops, req.samples, noise)


def _run(req: schemas.SimulateIn, slots: limits.WorkSlots, results: _Results) -> service.SimRun:
    """The request's simulation: checked first (a cached run never stands in for a request that
    breaks a rule), then the cached run or a new one in a slot."""
    noise, need = _work(req)
    key = _key(req)
    run = results.get(key)
    if run is None:
        run = _simulate(req, slots, noise, need)
    results.put(key, run)
    return run


def _simulate(
    req: schemas.SimulateIn, slots: limits.WorkSlots, noise: object, need: int
) -> service.SimRun:
    with slots.slot(need):  # 503 when the running simulations hold the count or the bytes
        if req.mode == "training":
            t = req.training
            return service.run_training(
                t.schedule,
                t.pp,
                t.vpp,
                t.microbatches,
                t.durations_ms,
                noise,
                req.samples,
                req.seed,
                req.comm,
                limits.MAX_OPS,
            )
        s = req.serving
        problem = service.ServingProblem(**s.model_dump(exclude={"durations_ms"}))
        return service.run_serving(problem, s.durations_ms, noise, req.samples, req.seed, req.comm)


def _error(status: int, field: str, msg: str) -> JSONResponse:
    loc = ["body", *field.split(".")] if field and field != "body" else ["body"]
    return JSONResponse(
        status_code=status,
        content={"detail": [{"loc": loc, "msg": msg, "type": "value_error"}], "field": field},
    )


def create_app(
    storage: str | None = None,
    *,
    bound_host: str | None = "127.0.0.1",
    allowed_hosts: Iterable[str] = (),
    auth_token: str | None = None,
) -> FastAPI:
    """The app; ``storage`` is the study store the studies tab reads (None: the default).

    It answers only ``Host`` names of loopback, ``bound_host`` (the address it is served on)
    and ``allowed_hosts`` (HTTP 400 otherwise); with ``auth_token`` every request needs it
    (HTTP 401 otherwise; :mod:`plena_opt.web.guard`)."""
    # no /docs or /redoc: FastAPI's pages load their scripts from a CDN (the app is offline)
    app = FastAPI(
        title="plena-opt ui", docs_url=None, redoc_url=None, openapi_url="/api/openapi.json"
    )
    _add_body_cap(app)
    if auth_token is not None:
        app.add_middleware(guard.TokenAuth, token=auth_token)
    # added last, so it runs first: a rebound name is refused before anything else
    hosts = guard.allowed_hosts(bound_host, allowed_hosts)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=hosts, www_redirect=False)
    _add_error_handlers(app)
    _add_simulation_routes(app, _Results(limits.RESULT_CACHE), limits.WorkSlots())
    _add_study_routes(app, storage)
    _add_metric_route(app)
    app.state.planner_jobs = add_planner_routes(app)

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


def _add_body_cap(app: FastAPI) -> None:
    """413 for a body above ``MAX_BODY_BYTES`` (declared, or read when chunked)."""

    @app.middleware("http")
    async def cap_body(request: Request, call_next):
        size = request.headers.get("content-length")
        if size is not None and (not size.isdigit() or int(size) > limits.MAX_BODY_BYTES):
            return _error(413, "body", f"request body above {limits.MAX_BODY_BYTES} bytes")
        if request.method == "POST" and size is None:
            body = await request.body()  # chunked upload: bound it after reading
            if len(body) > limits.MAX_BODY_BYTES:
                return _error(413, "body", f"request body above {limits.MAX_BODY_BYTES} bytes")
        return await call_next(request)


def _add_error_handlers(app: FastAPI) -> None:
    """422 naming the field for pydantic and ``PlenaInputError`` failures; 404 for an unknown
    study, planner job or plan of a job (other unknown names are 422)."""

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": ("body",), "msg": "invalid request"}
        loc = [str(x) for x in first.get("loc", ()) if x != "body"]
        field = ".".join(loc)
        msg = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
        detail = [
            {"loc": [str(x) for x in e.get("loc", ())], "msg": str(e.get("msg")), "type": e["type"]}
            for e in errors
        ]
        text = f"{field}: {msg}" if field else msg
        return JSONResponse(
            status_code=422, content={"detail": detail, "field": field, "message": text}
        )

    @app.exception_handler(HTTPException)
    async def unreadable(request: Request, exc: HTTPException):
        """A body FastAPI cannot parse (JSON nested past Python's recursion limit, an integer of
        more than 4,300 digits) is bad input like any other: 422 naming ``body``, not 400."""
        if exc.status_code != 400 or exc.detail != _UNPARSED:
            return await http_exception_handler(request, exc)
        cause = exc.__cause__
        why = "nested too deeply" if isinstance(cause, RecursionError) else f"unreadable: {cause}"
        return _error(422, "body", clip(f"body: the JSON document is {why}", 200))

    @app.exception_handler(PlenaNotFoundError)
    async def not_found(request: Request, exc: PlenaNotFoundError) -> JSONResponse:
        status = 404 if exc.field in ("study", "job", "key") else 422
        return _error(status, exc.field, str(exc))

    @app.exception_handler(PlenaInputError)
    async def bad_input(_: Request, exc: PlenaInputError) -> JSONResponse:
        return _error(422, exc.field or "", str(exc))

    @app.exception_handler(limits.LimitError)
    async def over_limit(_: Request, exc: limits.LimitError) -> JSONResponse:
        if not exc.busy:  # above a bound: the request can never run
            text = str(exc)
            return _error(
                422, exc.field, text if text.startswith(exc.field) else f"{exc.field}: {text}"
            )
        response = _error(503, exc.field, str(exc))
        response.headers["Retry-After"] = "1"
        return response


def _add_simulation_routes(app: FastAPI, results: _Results, slots: limits.WorkSlots) -> None:
    """``/api/catalog``, ``/api/simulate``, ``/api/trace`` (from the cached run) and
    ``/api/estimate``."""

    @app.get("/api/catalog")
    def catalog() -> dict:
        return service.catalog()

    @app.post("/api/simulate", response_model=schemas.SimulateOut)
    def simulate(req: schemas.SimulateIn) -> schemas.SimulateOut:
        run = _run(req, slots, results)
        return views.simulate_out(run, _key(req))

    @app.post("/api/trace")
    def trace(req: schemas.TraceIn) -> JSONResponse:
        run = _run(req, slots, results)
        name = f"plena-opt-{run.mode}-{req.sample}.json"
        return JSONResponse(
            service.trace_of(run, req.sample),
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )

    @app.post("/api/estimate")
    def estimate(req: schemas.EstimateIn) -> dict:
        problem = service.ServingProblem(**req.model_dump(exclude={"durations_ms"}))
        return service.estimate_serving(problem)


def _add_metric_route(app: FastAPI) -> None:
    """``GET /api/metrics``: the metric registry's declarations, in its order."""

    @app.get("/api/metrics", response_model=list[schemas.MetricOut])
    def metric_list() -> list[dict]:
        from plena_opt import metrics

        return [{k: getattr(m, k) for k in schemas.MetricOut.model_fields} for m in metrics.METRICS]


def _add_study_routes(app: FastAPI, storage: str | None) -> None:
    """``/api/studies``, ``/api/studies/{name}/front`` (a search study) and
    ``/api/studies/{name}/serving`` (a serving comparison) over the study store ``storage``."""

    @app.get("/api/studies", response_model=list[schemas.StudyOut])
    def studies() -> list[dict]:
        return service.list_studies(storage)

    @app.get("/api/studies/{name}/front", response_model=schemas.FrontOut)
    def front(name: str) -> dict:
        if len(name) > limits.MAX_NAME_CHARS:
            raise PlenaInputError("name", f"name: at most {limits.MAX_NAME_CHARS} characters")
        return service.study_front(storage, name, limits.MAX_FRONT_TRIALS)

    @app.get("/api/studies/{name}/serving", response_model=schemas.ServingStudyOut)
    def serving(name: str) -> dict:
        if len(name) > limits.MAX_NAME_CHARS:
            raise PlenaInputError("name", f"name: at most {limits.MAX_NAME_CHARS} characters")
        return service.serving_front(storage, name, limits.MAX_FRONT_TRIALS)
