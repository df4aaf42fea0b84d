"""An independent fuzz of every HTTP endpoint of the web app (issue 29): sizes at and past every
bound (samples, MoE experts and tokens, schedule ops, window steps, degrees, body size, JSON
nesting), wrong types, NaN/inf and huge integers. Never a 500; bad input is 422 naming the field
(a body above the cap 413); a request past a bound is refused before it allocates (tracemalloc:
a refused request stays under :data:`REFUSED_PEAK_BYTES`). Deterministic: the random part is
seeded."""

from __future__ import annotations

import json
import math
import random
import tracemalloc

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from plena_opt.api import limits as shared  # noqa: E402
from plena_opt.bounds import MAX_CONCURRENCY, MAX_REQUEST_RATE  # noqa: E402
from plena_opt.web import limits  # noqa: E402
from plena_opt.web.app import create_app  # noqa: E402

#: Peak Python/numpy allocation of one refused request, client and server together (the body,
#: its parse and the error reply; a refused 1 MiB body is read once by the server).
REFUSED_PEAK_BYTES = 4 * limits.MIB
#: API routes this fuzz covers (a new route fails ``test_every_route_is_fuzzed``).
FUZZED = {
    "/api/catalog",
    "/api/metrics",
    "/api/simulate",
    "/api/trace",
    "/api/estimate",
    "/api/studies",
    "/api/studies/{name}/front",
    "/api/studies/{name}/serving",
    "/api/openapi.json",
    "/api/planner/catalog",
    "/api/planner/jobs",
    "/api/planner/jobs/{job}",
    "/api/planner/jobs/{job}/cancel",
    "/api/planner/jobs/{job}/plan",
    "/api/planner/jobs/{job}/bundle",
    "/api/planner/jobs/{job}/reestimate",
    "/",
}
HUGE = [2**31, 2**63, 2**64 + 1, 10**30]
WRONG = [None, "x", "", [], {}, [1], {"a": 1}, 1.5, True, -1]
NONFINITE = [math.nan, math.inf, -math.inf, 1e308, -1e308]
SERVING_OK = {"tp": 8, "pp": 4, "batch_size": 4, "input_seq": 256, "output_seq": 16}


@pytest.fixture(scope="module")
def client(tmp_path_factory) -> TestClient:
    store = tmp_path_factory.mktemp("webfuzz") / "studies.log"
    app = create_app(storage=str(store))
    return TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False)


def _post(client: TestClient, path: str, body: object):
    raw = json.dumps(body, allow_nan=True).encode()  # NaN/Infinity as Python's json writes them
    return client.post(path, content=raw, headers={"content-type": "application/json"})


def _refused(r, field: str | None = None) -> None:
    assert r.status_code == 422, (r.status_code, r.text[:300])
    doc = r.json()
    if field is not None:
        got = doc.get("field") or ".".join(doc["detail"][0]["loc"][1:])
        assert got == field or got.startswith(field + "."), (field, doc)


def _peak(call) -> tuple[object, int]:
    """``call()``'s result and the peak bytes traced while it ran."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = call()
        return result, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def _training(**training) -> dict:
    t = {"schedule": "1f1b", "pp": 2, "vpp": 1, "microbatches": 2}
    t.update(training)
    return {"mode": "training", "training": t, "samples": 0}


def _moe(**moe) -> dict:
    spec = {"experts": 8, "tokens": 64}
    spec.update(moe)
    return {**_training(), "samples": 4, "noise": {"moe": spec}}


# (path, body, field) refused with 422 naming ``field``: every bound one past it, then huge.
PAST_BOUNDS = [
    ("/api/simulate", {**_training(), "samples": limits.MAX_SAMPLES + 1}, "samples"),
    ("/api/simulate", {**_training(), "seed": 2**32}, "seed"),
    ("/api/simulate", _training(pp=limits.MAX_PP + 1), "training.pp"),
    ("/api/simulate", _training(vpp=limits.MAX_VPP + 1), "training.vpp"),
    ("/api/simulate", _training(microbatches=limits.MAX_MICROBATCHES + 1), "training.microbatches"),
    # each size at its bound, the product far past the op bound (256·64·8192·2 ops)
    (
        "/api/simulate",
        _training(
            schedule="interleaved-1f1b",
            pp=limits.MAX_PP,
            vpp=limits.MAX_VPP,
            microbatches=limits.MAX_MICROBATCHES,
        ),
        "samples",
    ),
    ("/api/simulate", _training(pp=limits.MAX_PP, microbatches=limits.MAX_PP), "training"),
    (
        "/api/simulate",
        _training(durations_ms={f"K{i}": 1.0 for i in range(limits.MAX_DURATION_KEYS + 1)}),
        "training.durations_ms",
    ),
    ("/api/simulate", _moe(experts=shared.MAX_MOE_EXPERTS + 1), "noise.moe.experts"),
    ("/api/simulate", _moe(tokens=shared.MAX_MOE_TOKENS + 1), "noise.moe.tokens"),
    ("/api/simulate", _moe(alpha=shared.MAX_MOE_ALPHA * 10), "noise.moe.alpha"),
    ("/api/simulate", _moe(op_types=["F"] * (limits.MAX_DURATION_KEYS + 1)), "noise.moe.op_types"),
    (
        "/api/simulate",
        {**_training(), "noise": {"straggler": {"probability": 0.5, "factor_high": 101.0}}},
        "noise.straggler.factor_high",
    ),
    ("/api/simulate", {**_training(), "noise": "x" * (limits.MAX_NOISE_CHARS + 1)}, "noise"),
    *[("/api/simulate", _moe(experts=n), "noise.moe.experts") for n in HUGE],
    *[("/api/simulate", _moe(tokens=n), "noise.moe.tokens") for n in HUGE],
    *[("/api/simulate", {**_training(), "samples": n}, "samples") for n in HUGE],
    *[("/api/simulate", _training(pp=n), "training.pp") for n in HUGE],
    *[("/api/trace", {**_training(), "samples": n}, "samples") for n in HUGE],
    (
        "/api/simulate",
        {"mode": "serving", "serving": {**SERVING_OK, "max_window_steps": 1025}, "samples": 0},
        "serving.max_window_steps",
    ),
    # a window of 1,024 decode steps on 32 ranks: ops × samples past the work bound
    (
        "/api/simulate",
        {
            "mode": "serving",
            "serving": {"tp": 1, "pp": 32, "batch_size": 32, "max_window_steps": 1024},
            "samples": limits.MAX_SAMPLES,
        },
        "samples",
    ),
    *[
        ("/api/estimate", {**SERVING_OK, name: top + 1}, name)
        for name, top in [
            ("tp", limits.MAX_DEGREE),
            ("ep", limits.MAX_DEGREE),
            ("dp", limits.MAX_DEGREE),
            ("pp", limits.MAX_DEGREE),
            ("cp", limits.MAX_DEGREE),
            ("batch_size", limits.MAX_BATCH),
            ("input_seq", limits.MAX_INPUT_SEQ),
            ("output_seq", limits.MAX_OUTPUT_SEQ),
            ("max_window_steps", limits.MAX_WINDOW_STEPS),
        ]
    ],
    ("/api/estimate", {**SERVING_OK, "model": "m" * (limits.MAX_NAME_CHARS + 1)}, "model"),
    *[("/api/estimate", {**SERVING_OK, "batch_size": n}, "batch_size") for n in HUGE],
]


@pytest.mark.parametrize(("path", "body", "field"), PAST_BOUNDS)
def test_past_a_bound_is_422_naming_the_field_without_allocating(client, path, body, field):
    r, peak = _peak(lambda: _post(client, path, body))
    _refused(r, field)
    assert peak < REFUSED_PEAK_BYTES, (field, peak)


# At the bound: accepted (each is a small simulation; the expensive products are above).
AT_BOUNDS = [
    ("/api/simulate", {**_training(pp=1, microbatches=1), "samples": limits.MAX_SAMPLES}),
    ("/api/simulate", {**_training(), "seed": 2**32 - 1}),
    ("/api/simulate", _training(pp=limits.MAX_PP, microbatches=1)),
    ("/api/simulate", _training(pp=1, microbatches=limits.MAX_MICROBATCHES)),
    (
        "/api/simulate",
        _training(schedule="interleaved-1f1b", pp=2, vpp=limits.MAX_VPP, microbatches=2),
    ),
    ("/api/simulate", _moe(experts=shared.MAX_MOE_EXPERTS, top_k=2, ep=4)),
    ("/api/simulate", _moe(tokens=shared.MAX_MOE_TOKENS, alpha=shared.MAX_MOE_ALPHA)),
    (
        "/api/simulate",
        {**_training(), "noise": {"straggler": {"probability": 0.5, "factor_high": 100.0}}},
    ),
    (
        "/api/simulate",
        {"mode": "serving", "serving": {**SERVING_OK, "max_window_steps": 1024}, "samples": 0},
    ),
    ("/api/trace", {**_training(), "samples": 2, "sample": "p99"}),
    ("/api/estimate", {**SERVING_OK, "batch_size": limits.MAX_BATCH}),
    ("/api/estimate", {**SERVING_OK, "input_seq": limits.MAX_INPUT_SEQ}),
]


@pytest.mark.parametrize(("path", "body"), AT_BOUNDS)
def test_at_a_bound_is_accepted(client, path, body):
    r = _post(client, path, body)
    assert r.status_code == 200, r.text[:300]


def _fields() -> list[tuple[str, list[str]]]:
    """Every (path, field location) of the POST bodies: the fuzz below replaces each."""
    train = ["schedule", "pp", "vpp", "microbatches", "durations_ms"]
    serve = [*SERVING_OK, "ep", "dp", "cp", "model", "noc", "memory", "moe_tp_mode"]
    serve += ["comm_overlap", "max_window_steps", "durations_ms"]
    top = ["mode", "training", "serving", "noise", "samples", "seed", "simulate_comm"]
    out = [("/api/simulate", [k]) for k in top] + [("/api/trace", ["sample"])]
    out += [("/api/simulate", ["training", k]) for k in train]
    out += [("/api/simulate", ["serving", k]) for k in serve]
    out += [("/api/simulate", ["noise", k]) for k in ("jitter_sigma", "rank_sigma", "version")]
    out += [("/api/simulate", ["noise", "moe", k]) for k in ("experts", "tokens", "top_k", "ep")]
    out += [("/api/simulate", ["noise", "moe", k]) for k in ("alpha", "fraction", "op_types")]
    out += [("/api/simulate", ["noise", "straggler", k]) for k in ("probability", "factor_low")]
    return out + [("/api/estimate", [k]) for k in serve]


def _base(path: str, where: list[str]) -> dict:
    if path == "/api/estimate":
        return dict(SERVING_OK)
    if where[0] == "serving":
        return {"mode": "serving", "serving": dict(SERVING_OK), "samples": 0}
    body = {**_training(), "samples": 2}
    if where[0] == "noise" and len(where) > 2:
        body["noise"] = {where[1]: {"experts": 8, "tokens": 8} if where[1] == "moe" else {}}
    elif where[0] == "noise":
        body["noise"] = {}
    return body


def _set(body: dict, where: list[str], value: object) -> dict:
    node = body
    for key in where[:-1]:
        node = node.setdefault(key, {})
    node[where[-1]] = value
    return body


@pytest.mark.parametrize(("path", "where"), _fields(), ids=lambda x: str(x))
def test_wrong_types_nonfinite_and_huge_values_are_never_500(client, path, where):
    """Every field with every wrong type, NaN/±inf/±1e308, huge and negative integers: 422
    (a bool, a null or a fitting number may be a valid value of some fields: then 200)."""
    for value in [*WRONG, *NONFINITE, *HUGE, -(2**63), "1e400", "9" * 5000]:
        r = _post(client, path, _set(_base(path, where), where, value))
        assert r.status_code in (200, 422), (where, value, r.status_code, r.text[:200])
        if isinstance(value, float) and not math.isfinite(value) or value in (2**63, 2**64 + 1):
            _refused(r)  # never a valid value of any field


def _deep(depth: int, kind: str) -> bytes:
    inner = "[" * depth + "]" * depth if kind == "list" else '{"a":' * depth + "1" + "}" * depth
    return ('{"mode": "training", "samples": 0, "noise": ' + inner + "}").encode()


@pytest.mark.parametrize("depth", [10, 1000, 100_000, 170_000])
@pytest.mark.parametrize("kind", ["list", "dict"])
def test_deeply_nested_json_is_422_without_allocating(client, depth, kind):
    raw = _deep(depth, kind)
    assert len(raw) <= limits.MAX_BODY_BYTES  # under the body cap: the parser sees it

    r, peak = _peak(lambda: _post_raw(client, raw))
    _refused(r, "noise" if depth < 500 else None)
    assert peak < REFUSED_PEAK_BYTES + 4 * len(raw), peak


def _post_raw(client: TestClient, raw: bytes, headers: dict | None = None):
    h = {"content-type": "application/json", **(headers or {})}
    return client.post("/api/simulate", content=raw, headers=h)


def test_body_at_the_cap_is_read_and_one_byte_more_is_413(client):
    body = b'{"mode": "training", "samples": 0}'
    at = body + b" " * (limits.MAX_BODY_BYTES - len(body))
    assert _post_raw(client, at).status_code == 200
    over = at + b" "
    r, peak = _peak(lambda: _post_raw(client, over))
    assert r.status_code == 413 and r.json()["field"] == "body"
    assert peak < REFUSED_PEAK_BYTES + 2 * len(over), peak  # the client's copy; never parsed

    def chunks():  # no Content-Length: the server counts what it reads
        for i in range(0, len(over), 1 << 16):
            yield over[i : i + (1 << 16)]

    r = client.post("/api/simulate", content=chunks(), headers={"content-type": "x"})
    assert r.status_code == 413
    for length in ("-1", "1e9", "99999999999999999999999", "abc"):
        r = _post_raw(client, body, {"content-length": length})
        assert r.status_code in (400, 413), (length, r.status_code)


@pytest.mark.parametrize(
    "raw",
    [b"", b"\xff\xfe\x00", b"[]", b"null", b"1", b'"x"', b"{", b'{"samples": NaN}'],
    ids=lambda r: repr(r)[:20],
)
def test_malformed_bodies_are_422(client, raw):
    for path in ("/api/simulate", "/api/trace", "/api/estimate"):
        r = client.post(path, content=raw, headers={"content-type": "application/json"})
        _refused(r)


def test_a_seeded_random_fuzz_of_the_post_endpoints(client):
    """300 requests with each field drawn from cheap valid values and bad ones: a request with
    any bad field is 422, never 500; with none, 200."""
    rng = random.Random(29)
    good = {
        "samples": [0, 1, 7],
        "seed": [0, 1, 2**32 - 1],
        "pp": [1, 2, 3],
        "microbatches": [1, 2, 5],
        "noise": ["sigma=0.05", {}, {"rank_sigma": 0.1}, {"moe": {"experts": 4, "tokens": 16}}],
    }
    bad = {
        "samples": [-1, limits.MAX_SAMPLES + 1, 2**63, "x", 1.5, None, math.nan],
        "seed": [-1, 2**32, math.inf, "0x1"],
        "pp": [0, limits.MAX_PP + 1, 2**40, -(2**63), 2.5, "2.5"],
        "microbatches": [0, limits.MAX_MICROBATCHES + 1, 10**30, [], math.inf],
        "noise": [
            {"moe": {"experts": 2**40, "tokens": 8}},
            {"moe": {"experts": 8, "tokens": -1}},
            {"jitter_sigma": math.nan},
            {"unknown": 1},
            "sigma=",
            7,
        ],
    }
    statuses = {200: 0, 422: 0}
    for _ in range(300):
        wrong = {k for k in good if rng.random() < 0.2}
        pick = {k: rng.choice(bad[k] if k in wrong else good[k]) for k in good}
        training = {"schedule": rng.choice(["1f1b", "gpipe"]), "pp": pick["pp"]}
        training["microbatches"] = pick["microbatches"]
        body = {"mode": "training", "training": training}
        body.update({k: pick[k] for k in ("samples", "seed", "noise")})
        path = rng.choice(["/api/simulate", "/api/trace"])
        r = _post(client, path, body)
        assert r.status_code == (422 if wrong else 200), (body, r.status_code, r.text[:200])
        statuses[r.status_code] += 1
    assert min(statuses.values()) > 50, statuses


@pytest.mark.parametrize(
    "name",
    ["x", "x" * limits.MAX_NAME_CHARS, "x" * (limits.MAX_NAME_CHARS + 1), "%00", "..%2f..", "é"],
)
def test_study_routes_refuse_or_miss_never_500(client, name):
    for kind in ("front", "serving"):
        r = client.get(f"/api/studies/{name}/{kind}")
        want = 422 if len(name) > limits.MAX_NAME_CHARS else 404
        assert r.status_code == want, (name, r.status_code, r.text[:200])


def test_get_routes_and_wrong_methods(client):
    for path in ("/", "/api/catalog", "/api/metrics", "/api/studies", "/api/openapi.json"):
        assert client.get(path).status_code == 200, path
    assert client.post("/api/metrics", json={}).status_code == 405
    for path in ("/api/simulate", "/api/trace", "/api/estimate"):
        assert client.get(path).status_code == 405, path
    assert client.post("/api/catalog", json={}).status_code == 405
    assert client.get("/api/nope").status_code == 404


def test_every_route_is_fuzzed():
    app = create_app(storage=None)
    routes = {r.path for r in app.routes if getattr(r, "methods", None)}
    assert routes == FUZZED


@pytest.mark.parametrize(
    "content",
    [random.Random(29).randbytes(2000), b"\x00" * 100, b'{"op_code": 0, "worker_id": "x"}\n'],
    ids=["random", "zeros", "truncated-op"],
)
def test_a_damaged_store_is_422_naming_storage_not_500(tmp_path, content):
    store = tmp_path / "studies.log"
    store.write_bytes(content)
    c = TestClient(create_app(storage=str(store)), base_url="http://127.0.0.1")
    for path in ("/api/studies", "/api/studies/x/front", "/api/studies/x/serving"):
        r = c.get(path)
        _refused(r, "storage")
    assert store.read_bytes() == content  # the UI only reads the store


# The planner (issue 28): a tiny search (one device, one trial) so that an accepted start ends
# at once; every size past its bound is refused naming the field before anything is loaded.
PLANNER_OK = {"model": "llama-3.2-1b", "chip": "h200-sxm", "noc": "single_device", "trials": 1}
PLANNER_OK |= {"serving": "aggregated", "input_seq": 128, "output_seq": 8}
PLANNER_PAST = [
    ("input_seq", limits.MAX_INPUT_SEQ + 1),
    ("output_seq", limits.MAX_OUTPUT_SEQ + 1),
    ("devices", limits.MAX_DEGREE + 1),
    ("trials", limits.MAX_TRIALS + 1),
    ("gpus_per_node", 1025),
    ("concurrency", MAX_CONCURRENCY + 1),
    ("batch_sizes", "1," * 400),
    ("batch_sizes", ",".join(str(i) for i in range(1, shared.MAX_BATCH_SIZES + 2))),
    ("batch_sizes", str(limits.MAX_BATCH + 1)),
    ("objectives", ["ttft"] * 9),
    ("model", "m" * (limits.MAX_NAME_CHARS + 1)),
    ("seed", 2**32),
    ("model_dir", "d" * (shared.MAX_PATH_CHARS + 1)),
    ("noc_name", "n" * (limits.MAX_NAME_CHARS + 1)),
    ("request_rate", MAX_REQUEST_RATE * 2),
    ("percentile", "p" * (limits.MAX_NAME_CHARS + 1)),
    *[(f, n) for f in ("input_seq", "trials", "devices", "concurrency") for n in HUGE],
    *[("seed", n) for n in HUGE if n >= 2**32],
]


def _planner_base(field: str) -> dict:
    """The tiny search, without the field ``field`` replaces (one model, one cluster)."""
    drop = {"noc_document": "noc", "model_dir": "model"}.get(field)
    return {k: v for k, v in PLANNER_OK.items() if k != drop}


def _switch_noc(devices: int) -> dict:
    """A one-switch NoC profile document of ``devices`` devices."""
    from deepstack.presets import switch_noc

    doc = switch_noc(16).to_dict()
    doc["layers"]["L1"]["shape"] = [1, devices]
    return doc


# NoC profiles past MAX_DEVICES: refused before anything is built for their devices
PLANNER_PAST += [("noc_document", _switch_noc(n)) for n in (shared.MAX_DEVICES + 1, 10**18)]


@pytest.mark.parametrize(("field", "value"), PLANNER_PAST, ids=lambda x: str(x)[:20])
def test_planner_past_a_bound_is_422_naming_the_field(client, field, value):
    _post(client, "/api/planner/jobs", {**PLANNER_OK, "trials": 0})  # imports, outside the peak
    base = _planner_base(field)
    r, peak = _peak(lambda: _post(client, "/api/planner/jobs", {**base, field: value}))
    _refused(r, field)
    assert peak < REFUSED_PEAK_BYTES, (field, peak)


def test_planner_fields_never_500(client):
    """Every planner field with every wrong type, non-finite and huge value: 200 (a started
    job, cancelled at once), 422, or 503 while two jobs run; never 500."""
    names = ["devices", "batch_sizes", "concurrency", "engine", "objectives", "request_rate"]
    names += ["percentile"]
    for name in [*PLANNER_OK, *names, "model_dir", "noc_document", "noc_name"]:
        for value in [*WRONG, *NONFINITE, *HUGE, -(2**63), "9" * 5000]:
            r = _post(client, "/api/planner/jobs", {**_planner_base(name), name: value})
            assert r.status_code in (200, 422, 503), (name, value, r.status_code, r.text[:200])
            if r.status_code == 200:
                client.post(f"/api/planner/jobs/{r.json()['id']}/cancel")


def test_planner_fields_under_load_never_500(client):
    """A search under load (a workload and a percentile) with each of its fields wrong: 200,
    422 or 503, never 500."""
    loaded = {**PLANNER_OK, "concurrency": 2, "percentile": "p90", "engine": "vllm"}
    for name in ["concurrency", "request_rate", "engine", "percentile", "serving", "chip"]:
        for value in [*WRONG, *NONFINITE, *HUGE, "p95", "disaggregated", "both"]:
            r = _post(client, "/api/planner/jobs", {**loaded, name: value})
            assert r.status_code in (200, 422, 503), (name, value, r.status_code, r.text[:200])
            if r.status_code == 200:
                client.post(f"/api/planner/jobs/{r.json()['id']}/cancel")


def test_planner_job_and_key_routes_refuse_or_miss(client):
    job = _post(client, "/api/planner/jobs", PLANNER_OK).json()["id"]
    for name in ["x", "x" * 64, "x" * 65, "..%2f..", "é"]:
        for tail in ("", "/plan?key=a", "/bundle?key=a"):
            r = client.get(f"/api/planner/jobs/{name}{tail}")
            assert r.status_code == (422 if len(name) > 64 else 404), (name, tail, r.text[:200])
        assert client.post(f"/api/planner/jobs/{name}/cancel").status_code in (404, 422)
    for key in ["a", "x" * 201, "x" * (limits.MAX_NAME_CHARS + 1), "1P:a+2D:b", "tp1-%00"]:
        for route in ("plan", "bundle"):
            r = client.get(f"/api/planner/jobs/{job}/{route}", params={"key": key})
            assert r.status_code in (404, 422), (key, r.status_code, r.text[:200])
    assert client.get("/api/planner/catalog").status_code == 200
    assert client.get("/api/planner/jobs").status_code == 405


KNOBS_PAST = [
    ("batch_size", limits.MAX_BATCH + 1),
    ("tp", shared.MAX_DEVICES + 1),
    ("concurrency", MAX_CONCURRENCY + 1),
    ("request_rate", MAX_REQUEST_RATE * 2),
    ("precision", "p" * (limits.MAX_NAME_CHARS + 1)),
    ("key", "k" * (limits.MAX_NAME_CHARS + 1)),
    *[(f, n) for f in ("batch_size", "tp", "concurrency") for n in HUGE],
]


@pytest.fixture(scope="module")
def planned(client) -> tuple[str, str]:
    """A finished tiny job and one of its plan keys."""
    import time

    job = _post(client, "/api/planner/jobs", PLANNER_OK).json()["id"]
    for _ in range(600):
        v = client.get(f"/api/planner/jobs/{job}").json()
        if v["state"] != "running":
            break
        time.sleep(0.05)
    return job, v["answer"]["points"][0]["key"]


@pytest.mark.parametrize(("field", "value"), KNOBS_PAST, ids=lambda x: str(x)[:20])
def test_knobs_past_a_bound_are_422_naming_the_field(client, planned, field, value):
    job, key = planned
    url = f"/api/planner/jobs/{job}/reestimate"
    _post(client, url, {"key": key, "tp": 0})  # imports, outside the peak
    r, peak = _peak(lambda: _post(client, url, {"key": key, field: value}))
    _refused(r, field)
    assert peak < REFUSED_PEAK_BYTES, (field, peak)


def test_knob_fields_never_500(client, planned):
    job, key = planned
    url = f"/api/planner/jobs/{job}/reestimate"
    for name in ["key", "batch_size", "tp", "precision", "concurrency", "request_rate", "x"]:
        for value in [*WRONG, *NONFINITE, *HUGE, -(2**63), "9" * 5000]:
            r = _post(client, url, {"key": key, name: value})
            assert r.status_code in (200, 404, 422), (name, value, r.status_code, r.text[:200])
