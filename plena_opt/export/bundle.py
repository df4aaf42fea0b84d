"""A launch bundle: the servers of a plan or deployment, its router and the benchmark that
measures what the plan was priced for, per engine."""

from __future__ import annotations

from dataclasses import replace

from plena_opt.errors import PlenaInputError
from plena_opt.export.engines import BUILDERS
from plena_opt.export.launch import (
    ENGINE_NAMES,
    ENGINES,
    ExportSpec,
    LaunchConfig,
    parse_deployment_key,
    parse_point_key,
)

# Requests per concurrent slot in the benchmark: each slot serves this many requests one after
# another, so ramp-up and drain are a small share of the run (a chosen default, not fitted).
PROMPTS_PER_SLOT = 8


def bench(engine: str, spec: ExportSpec, concurrency: int, port: int, tag: str) -> LaunchConfig:
    """The benchmark at the workload's concurrency and fixed prompt/output lengths; its result
    file is what ``plena-opt validate --measurements`` reads."""
    suffix = ".jsonl" if engine == "sglang" else ".json"
    values = {
        "model": spec.model,
        "port": str(port),
        "input_len": str(spec.input_len),
        "output_len": str(spec.output_len),
        "num_prompts": str(PROMPTS_PER_SLOT * concurrency),
        "concurrency": str(concurrency),
        "result": f"{engine}-bench-{tag}{suffix}",
    }
    argv = [a.format(**values) for a in ENGINES[engine]["bench"]]
    note = (
        f"measures the priced workload: {concurrency} concurrent sequences, "
        f"{spec.input_len} prompt + {spec.output_len} output tokens each"
    )
    return LaunchConfig(engine, "bench", argv, [note])


def plan_bundle(engine: str, key: str, spec: ExportSpec) -> list[LaunchConfig]:
    """Servers (one per node) and benchmark of one aggregated plan ``key`` on ``engine``; a
    plan the engine cannot run as priced: one refused entry."""
    plan, batch, prec = parse_point_key(key)
    port = ENGINES[engine]["ports"]["serve"]
    pspec = replace(spec, precision=prec or spec.precision)
    servers = BUILDERS[engine](plan, batch, pspec, "serve", port)
    if any(s.refused for s in servers):
        return servers
    return [*servers, bench(engine, spec, batch, port, key)]


def deployment_bundle(engine: str, key: str, spec: ExportSpec) -> list[LaunchConfig]:
    """Prefill and decode servers, router and benchmark of a disaggregated deployment
    ``xP:KEY+yD:KEY``."""
    parsed = parse_deployment_key(key)
    if parsed is None:
        raise PlenaInputError("plan", f"{key!r} is not a deployment key (2P:KEY+3D:KEY)")
    x, pkey, y, dkey = parsed
    ports = ENGINES[engine]["ports"]
    out: list[LaunchConfig] = []
    batches = {}
    for role, k, n in (("prefill", pkey, x), ("decode", dkey, y)):
        plan, batch, prec = parse_point_key(k)
        batches[role] = batch
        servers = BUILDERS[engine](
            plan,
            batch,
            replace(spec, precision=prec or spec.precision),
            role,
            ports.get(role, ports["serve"]),
        )
        if any(s.refused for s in servers):
            return servers
        notes = [f"run {n} instance(s) of this command, on hosts {role}-0 … {role}-{n - 1}"]
        notes += [_prefill_cap_note(engine)] if role == "prefill" else []
        out += [replace(s, notes=[*s.notes, *notes]) for s in servers]
    concurrency = batches["decode"] * y
    if engine == "sglang":
        out.append(_router(x, y))
        port = ports["router"]
    else:
        port = ports["serve"]
        out = [replace(s, notes=[*s.notes, ENGINES[engine]["router_note"]]) for s in out]
    return [*out, bench(engine, spec, concurrency, port, key.replace(":", "").replace("+", "_"))]


def _prefill_cap_note(engine: str) -> str:
    """Why the prefill server writes no running cap (``caps.running_argv``)."""
    f = ENGINES[engine]["flags"]
    return (
        f"no {f['max_seqs']}: the prefill server runs the engine's default running cap, so a "
        f"step takes the waiting prompts its step token budget ({f['budget']}) holds, as the "
        "prefill pool was priced"
    )


def _router(x: int, y: int) -> LaunchConfig:
    """SGLang's prefill/decode router over ``x`` prefill and ``y`` decode servers."""
    eng = ENGINES["sglang"]
    ports = eng["ports"]
    argv = [a.format(port=ports["router"]) for a in eng["router"]]
    for i in range(x):
        argv += ["--prefill", f"http://prefill-{i}:{ports['prefill']}", str(ports["bootstrap"])]
    for i in range(y):
        argv += ["--decode", f"http://decode-{i}:{ports['decode']}"]
    note = "prefill-N / decode-N are the hosts of the servers: replace them with theirs"
    return LaunchConfig("sglang", "router", argv, [note])


def bundle(key: str, spec: ExportSpec, engines: tuple[str, ...] = ENGINE_NAMES) -> list:
    """Every engine's bundle of a plan key or a deployment key."""
    build = deployment_bundle if parse_deployment_key(key) else plan_bundle
    return [c for e in engines for c in build(e, key, spec)]
