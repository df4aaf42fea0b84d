"""gRPC fuzzer over every RPC of plena_opt.v1.PlenaOpt (issue 10).

A seeded generator draws ``--requests`` requests (default 10,000) — malformed bytes, fuzzed
fields, the audit's cases (150 stored studies, ``GetStudy("nope")`` and ``ListStudies``,
100 KB names, inline configs with 10**9 layers or 10**30 experts, nesting 100,000 deep,
denormal bandwidths in memory and NoC profiles, Simulate at the work limit and a 100,000-sample
re-check under short deadlines, CancelSearch during a search) — and sends them from
``--threads`` clients to a server subprocess on 127.0.0.1, each with a deadline; the run is
bounded by ``--max-seconds``. The server's address space is capped (``--server-memory-gib``,
RLIMIT_AS) so that a defect cannot take the machine down, and its RSS is sampled every 0.2 s.

Pass criteria: 0 INTERNAL, 0 UNKNOWN, 0 UNAVAILABLE; RESOURCE_EXHAUSTED only for requests that
deliberately exceed a server limit; DEADLINE_EXCEEDED only for the deliberately slow ones; the
server healthy at the end with peak RSS under ``--max-rss-mib``. Exit 1 otherwise.

    python benchmarks/bench_fuzz.py --requests 10000 --threads 4
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc

REPO = Path(__file__).resolve().parents[1]
C = grpc.StatusCode
ALWAYS_OK = {C.OK, C.INVALID_ARGUMENT, C.NOT_FOUND, C.FAILED_PRECONDITION}
NOCS = ["illustrative_gpu_node_8", "illustrative_gpu_cluster_32", "illustrative_ring_switch_32"]
MODELS = ["llama-3.1-8b", "gpt-oss-20b", "fictional-moe-128", "llama-3.2-1b"]
LONG = "n" * 100_000
VALID = [
    ("llama-3.1-8b", "illustrative_gpu_node_8", 8),
    ("llama-3.1-8b", "illustrative_gpu_node_8", 4),
    ("gpt-oss-20b", "illustrative_gpu_node_8", 8),
    ("llama-3.1-8b", "illustrative_gpu_cluster_32", 8),
]
STUDIES = 150
# Real searches and long Simulates in flight at once; the server gets SLOTS of each, twice the
# client threads, so that its concurrency limits answer only if work outlives its RPC (a
# stopped Simulate or search must free its slot within about a second).
HEAVY = 2
SLOTS = 8


@dataclass
class Case:
    """One request: RPC name, message (or raw bytes), what else it may answer and its deadline."""

    rpc: str
    request: object
    category: str
    also: set = field(default_factory=set)  # codes allowed besides ALWAYS_OK
    timeout: float = 10.0
    cancel_after: float | None = None
    cancel_rpc: bool = False  # cancel with CancelSearch(study_name), not by the client
    heavy: bool = False  # real work (a search, a long Simulate): sent at most HEAVY at once


def _pb():
    from plena_proto import plena_opt_pb2 as pb

    return pb


def _noc_json(rnd: random.Random) -> str:
    doc = json.loads(
        (REPO / "DeepStack/deepstack/profiles/illustrative_gpu_node_8.json").read_text()
    )
    layer = doc["layers"][rnd.choice(["L1", "L2", "L3"])]
    layer["link_bandwidth_gbytes_per_s"] = rnd.choice([5e-324, 1e-300, 1e300, -1, 0, 370])
    return json.dumps(doc)


# The audit's model-config sizes (bounded by the model-config part of issue 10).
MODEL_SIZES = [
    ("num_hidden_layers", 10**9),
    ("num_hidden_layers", 10**6),
    ("num_local_experts", 10**30),
    ("num_local_experts", 10**10),
    ("hidden_size", 10**12),
    ("vocab_size", 10**15),
    ("head_dim", 2**40),
]
MODEL_EDITS = [
    ("num_hidden_layers", 1e9),
    ("num_local_experts", 1e30),
    ("intermediate_size", -5),
    ("num_attention_heads", 0),
    ("layer_types", ["full_attention"] * 3),
]


def _hf_config(rnd: random.Random, sizes: bool) -> str:
    from plena_opt.models import builtin_config

    cfg = builtin_config(rnd.choice(["llama-3.2-1b", "gpt-oss-20b"]))
    key, value = rnd.choice(MODEL_EDITS + (MODEL_SIZES if sizes else []))
    cfg[key] = value
    return json.dumps(cfg)


def _system(rnd: random.Random, pb, sizes: bool) -> object:
    kind = rnd.random()
    model = pb.ModelSource(name=rnd.choice(MODELS))
    if kind < 0.15:
        model = pb.ModelSource(hf_config_json=_hf_config(rnd, sizes), display_name="fuzz")
    elif kind < 0.2:
        model = pb.ModelSource(hf_config_json="[" * 100_000, display_name="deep")
    elif kind < 0.25:
        model = pb.ModelSource(name=rnd.choice(["nope", LONG, "../etc/passwd", ""]))
    noc = pb.ProfileSource(name=rnd.choice(NOCS))
    if rnd.random() < 0.1:
        noc = pb.ProfileSource(json=_noc_json(rnd))
    elif rnd.random() < 0.05:
        noc = pb.ProfileSource(json='{"a":' * 50_000)
    spec = pb.SystemSpec(model=model, noc=noc)
    r = rnd.random()
    if r < 0.15:
        gbs = rnd.choice([5e-324, 1e-300, 1e300, float("inf"), float("nan"), -1.0, 0.0, 1000.0])
        spec.memory.fixed_bandwidth.bandwidth_gbytes_per_s = gbs
        if rnd.random() < 0.5:
            spec.memory.fixed_bandwidth.capacity_gib = rnd.choice([5e-324, 1e300, 64.0, -3.0])
    elif r < 0.2:
        spec.memory.name = rnd.choice(["fictional_stacked_dram", "unbounded", LONG[:5000], "x"])
    elif r < 0.25:
        spec.chip.json = json.dumps({"config": {"MLEN": rnd.choice([2**40, 0, 3.5, "x"])}})
    return spec


def _plan(rnd: random.Random, pb) -> object:
    plan = pb.Plan()
    for dim in ("tp", "ep", "dp", "pp", "cp"):
        if rnd.random() < 0.6:
            setattr(plan, dim, rnd.choice([1, 2, 4, 8, 3, 0, -1, 2**62]))
    plan.moe_tp_mode = rnd.choice(["", "replace", "keep", "swap"])
    plan.comm_overlap = rnd.choice(["", "none", "full", "partial"])
    return plan


def _workload(rnd: random.Random, pb) -> object:
    w = pb.Workload()
    for name in ("batch_size", "input_seq_len", "output_seq_len"):
        if rnd.random() < 0.4:
            setattr(w, name, rnd.choice([1, 16, 2048, 0, -4, 2**40, 2**62]))
    if rnd.random() < 0.2:
        w.frequency_hz = rnd.choice([5e-324, 1e300, float("nan"), 1e9])
    return w


def draw(rnd: random.Random, sizes: bool = True) -> Case:
    """One fuzzed request (mostly cheap: rejected or a fast answer); ``sizes`` includes the
    audit's huge model-config sizes."""
    pb = _pb()
    r = rnd.random()
    if r < 0.08:  # raw bytes against any RPC
        rpc = rnd.choice(RPCS)
        data = bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 64)))
        return Case(rpc, data, "raw bytes")
    if r < 0.26:  # a valid plan on a valid system (an answer, not a rejection)
        model, noc, tp = rnd.choice(VALID)
        req = pb.EstimateRequest(
            system=pb.SystemSpec(model=pb.ModelSource(name=model), noc=pb.ProfileSource(name=noc)),
            workload=pb.Workload(batch_size=rnd.choice([1, 8, 64])),
            plan=pb.Plan(tp=tp, dp=8 // tp if noc.endswith("_8") else 32 // tp),
        )
        return Case("Estimate", req, "valid estimate")
    if r < 0.38:
        req = pb.EstimateRequest(
            system=_system(rnd, pb, sizes), workload=_workload(rnd, pb), plan=_plan(rnd, pb)
        )
        return Case("Estimate", req, "estimate")
    if r < 0.46:
        name = rnd.choice(["nope", LONG, "", "study-007-" + "n" * 100, "\u00e9" * 40_000])
        pick = rnd.random()
        if pick < 0.4:
            return Case("GetStudy", pb.GetStudyRequest(study_name=name), "studies")
        if pick < 0.6:  # 150 stored studies with 110-character names, plus the searches' own
            return Case("ListStudies", pb.ListStudiesRequest(), "studies")
        return Case("CancelSearch", pb.CancelSearchRequest(study_name=name), "studies")
    if r < 0.50:
        return Case("ListProfiles", pb.ListProfilesRequest(kind=rnd.randrange(-2, 6)), "catalog")
    if r < 0.52:
        return Case("ListModels", pb.ListModelsRequest(), "catalog")
    if r < 0.80:
        return _simulate(rnd, pb, sizes)
    return _search(rnd, pb, sizes)


def _simulate(rnd: random.Random, pb, sizes: bool) -> Case:
    r = rnd.random()
    if r < 0.02:  # the audit's case: the work limit with a short deadline
        req = pb.SimulateRequest(
            training=pb.TrainingSchedule(
                schedule="1f1b", pp_size=8, microbatches=250, base_ms={"F": 1.0, "B": 2.0}
            ),
            samples=50_000,
        )
        case = Case("Simulate", req, "simulate at the work limit", {C.DEADLINE_EXCEEDED}, 1.5)
        case.heavy = True
        return case
    if r < 0.5:
        t = pb.TrainingSchedule(schedule=rnd.choice(["1f1b", "gpipe", "interleaved", "zb", "x"]))
        for name in ("pp_size", "vpp_size", "microbatches"):
            if rnd.random() < 0.7:
                setattr(t, name, rnd.choice([1, 2, 4, 8, 0, -1, 10**6]))
        for key in rnd.sample(["F", "B", "W", "VF", "Q"], rnd.randrange(0, 4)):
            t.base_ms[key] = rnd.choice([1.0, 2.5, -1.0, float("inf"), 1e300, 0.0])
        big = 10**6 in (t.pp_size, t.vpp_size, t.microbatches)
        limit = {C.RESOURCE_EXHAUSTED} if big else set()
        return Case("Simulate", pb.SimulateRequest(training=t, samples=rnd.choice([0, 10, 200])),
                    "simulate training", limit)  # fmt: skip
    target = pb.InferenceTarget(
        system=_system(rnd, pb, sizes), workload=_workload(rnd, pb), plan=_plan(rnd, pb)
    )
    if rnd.random() < 0.3:
        target.max_window_steps = rnd.choice([0, 1, 8, 2000])
    samples = rnd.choice([0, 10, 100, 10**9, -1])
    noise = pb.NoiseSpec(jitter_sigma=rnd.choice([0.0, 0.05, 5.0, float("nan")]))
    req = pb.SimulateRequest(
        inference=target, samples=samples, noise=noise, seed=rnd.choice([0, 7, -1, 2**40])
    )
    limit = {C.RESOURCE_EXHAUSTED} if samples == 10**9 else set()
    return Case("Simulate", req, "simulate inference", limit)


def _search(rnd: random.Random, pb, sizes: bool) -> Case:
    rpc = rnd.choice(["Search", "StreamSearch"])
    r = rnd.random()
    if r < 0.05:  # the audit's case: a 100,000-sample re-check with a short deadline
        opts = pb.SearchOptions(sampler="exhaustive", recheck_top_k=16, mc_samples=100_000)
        opts.study_name = f"recheck-{rnd.randrange(10**9)}"
        system = pb.SystemSpec(
            model=pb.ModelSource(name="llama-3.1-70b"),
            noc=pb.ProfileSource(name="illustrative_gpu_cluster_32"),
        )
        req = pb.SearchRequest(system=system, options=opts)
        case = Case(rpc, req, "re-check under a deadline", {C.DEADLINE_EXCEEDED}, 3.0)
        case.heavy = True
        return case
    if r < 0.15:  # a real small search, cancelled by the client or by CancelSearch
        opts = pb.SearchOptions(sampler="tpe", trials=100, seed=rnd.randrange(100))
        opts.study_name = f"fuzz-{rnd.randrange(10**9)}"
        system = pb.SystemSpec(
            model=pb.ModelSource(name="llama-3.1-8b"),
            noc=pb.ProfileSource(name="illustrative_gpu_node_8"),
        )
        req = pb.SearchRequest(system=system, options=opts)
        return Case(rpc, req, "small search", {C.CANCELLED, C.DEADLINE_EXCEEDED}, 20.0,
                    cancel_after=rnd.choice([None, 0.05, 0.3]), heavy=True,
                    cancel_rpc=rnd.random() < 0.5)  # fmt: skip
    opts = pb.SearchOptions(
        trials=rnd.choice([0, -1, 10**7, 2**62]),
        sampler=rnd.choice(["tpe", "nsga2", "x", ""]),
        study_name=rnd.choice(["", "ok", LONG[:200], "bad name!"]),
    )
    for _ in range(rnd.randrange(0, 3)):
        opts.batch_sizes.append(rnd.choice([1, 0, -3, 2**60]))
    if rnd.random() < 0.2:
        opts.mc_samples = rnd.choice([0, 10**9])
    limit = {C.RESOURCE_EXHAUSTED} if opts.trials > 20_000 or opts.mc_samples > 10**5 else set()
    req = pb.SearchRequest(
        system=_system(rnd, pb, sizes), workload=_workload(rnd, pb), options=opts
    )
    return Case(rpc, req, "rejected search", limit)


RPCS = ["Search", "StreamSearch", "CancelSearch", "Estimate", "Simulate", "ListModels",
        "ListProfiles", "GetStudy", "ListStudies"]  # fmt: skip


def send(channel: grpc.Channel, case: Case) -> tuple[grpc.StatusCode, str]:
    """Send one case; its status code and details (streaming replies are read to the end)."""
    streaming = case.rpc == "StreamSearch"
    raw = isinstance(case.request, bytes)
    msg = case.request
    make = channel.unary_stream if streaming else channel.unary_unary
    call = make(
        f"/plena_opt.v1.PlenaOpt/{case.rpc}",
        request_serializer=(lambda b: b) if raw else (lambda m: m.SerializeToString()),
        response_deserializer=lambda b: b,
    )
    try:
        if case.cancel_after is not None:
            fut = (
                call(msg, timeout=case.timeout)
                if streaming
                else call.future(msg, timeout=case.timeout)
            )
            time.sleep(case.cancel_after)
            if case.cancel_rpc:
                _cancel_search(channel, msg.options.study_name)
            else:
                fut.cancel()
            if streaming:
                list(fut)
            else:
                fut.result()
        elif streaming:
            list(call(msg, timeout=case.timeout))
        else:
            call(msg, timeout=case.timeout)
    except grpc.FutureCancelledError:
        return C.CANCELLED, ""
    except grpc.RpcError as exc:
        return exc.code(), exc.details() or ""
    return C.OK, ""


def _cancel_search(channel: grpc.Channel, study: str) -> None:
    pb = _pb()
    cancel = channel.unary_unary(
        "/plena_opt.v1.PlenaOpt/CancelSearch",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=lambda b: b,
    )
    try:
        cancel(pb.CancelSearchRequest(study_name=study), timeout=10)
    except grpc.RpcError as exc:  # NOT_FOUND once the search has finished
        if exc.code() not in ALWAYS_OK:
            raise


def _populate(store: Path) -> None:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    js = JournalStorage(JournalFileBackend(str(store)))
    for i in range(STUDIES):
        optuna.create_study(study_name=f"study-{i:03d}-" + "n" * 100, storage=js)


def start(store: Path, memory_gib: float) -> tuple[subprocess.Popen, str]:
    """The server subprocess (address space capped) and its target."""
    cap = int(memory_gib * 2**30)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    cmd = [sys.executable, "-m", "plena_server", "--host", "127.0.0.1", "--port", "0",
           "--storage", str(store), "--grace", "2",
           "--max-searches", str(SLOTS), "--max-simulates", str(SLOTS)]  # fmt: skip
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    failures = []
    for _ in range(2):  # one retry: a start died once (exit unknown) in a suite run at load 20
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env, preexec_fn=limit)  # fmt: skip
        line = proc.stdout.readline()
        if "serving on" in line:
            return proc, f"127.0.0.1:{line.strip().rsplit(':', 1)[1]}"
        proc.kill()
        code = proc.wait()
        failures.append(f"exit {code}: {line!r} {proc.stderr.read()[-2000:]}")
    raise RuntimeError("server did not start: " + " | ".join(failures))


def _rss_mib(pid: int, key: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class Report:
    requests: int = 0
    seconds: float = 0.0
    codes: collections.Counter = field(default_factory=collections.Counter)
    by_rpc: dict = field(default_factory=lambda: collections.defaultdict(collections.Counter))
    failures: list = field(default_factory=list)
    examples: dict = field(default_factory=dict)
    peak_rss_mib: float = 0.0
    final_rss_mib: float = 0.0
    healthy: bool = False

    @property
    def ok(self) -> bool:
        return not self.failures and self.healthy


def run(
    requests: int,
    threads: int,
    seed: int,
    max_seconds: float,
    memory_gib: float,
    sizes: bool = True,
) -> Report:
    """Fuzz a fresh server; the tally and any failures."""
    rep = Report()
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "studies.log"
        _populate(store)
        proc, target = start(store, memory_gib)
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.2):
                try:
                    rep.peak_rss_mib = max(rep.peak_rss_mib, _rss_mib(proc.pid))
                except OSError:
                    return

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        lock = threading.Lock()
        heavy = threading.Semaphore(HEAVY)
        counter = iter(range(requests))
        t0 = time.monotonic()

        def worker(k: int) -> None:
            rnd = random.Random(seed * 1000 + k)
            opts = [("grpc.max_receive_message_length", 16 * 2**20),
                    ("grpc.max_send_message_length", 16 * 2**20)]  # fmt: skip
            with grpc.insecure_channel(target, options=opts) as ch:
                while time.monotonic() - t0 < max_seconds:
                    with lock:
                        i = next(counter, None)
                    if i is None:
                        return
                    case = draw(rnd, sizes)
                    if case.heavy:  # at most HEAVY at once: under the server's slot limits
                        with heavy:
                            code, details = send(ch, case)
                    else:
                        code, details = send(ch, case)
                    with lock:
                        rep.requests += 1
                        rep.codes[code.name] += 1
                        rep.by_rpc[case.rpc][code.name] += 1
                        limit_reply = "limit" in details or "already runs" in details
                        if code == C.RESOURCE_EXHAUSTED and not limit_reply:
                            allowed = ALWAYS_OK  # never for a small request
                        else:
                            allowed = ALWAYS_OK | case.also
                        if code not in allowed:
                            rep.failures.append((case.rpc, case.category, code.name))
                            rep.examples.setdefault((case.rpc, case.category, code.name), details)

        pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        rep.seconds = time.monotonic() - t0
        rep.healthy = _healthy(target)
        try:
            rep.peak_rss_mib = max(rep.peak_rss_mib, _rss_mib(proc.pid, "VmHWM"))
            rep.final_rss_mib = _rss_mib(proc.pid)
        except OSError:
            rep.healthy = False
        stop.set()
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
    return rep


def _healthy(target: str) -> bool:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    try:
        with grpc.insecure_channel(target) as ch:
            reply = health_pb2_grpc.HealthStub(ch).Check(
                health_pb2.HealthCheckRequest(), timeout=10
            )
        return reply.status == health_pb2.HealthCheckResponse.SERVING
    except grpc.RpcError:
        return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-seconds", type=float, default=900.0)
    ap.add_argument("--server-memory-gib", type=float, default=6.0)
    ap.add_argument("--max-rss-mib", type=float, default=2048.0)
    ap.add_argument(
        "--no-model-sizes",
        dest="sizes",
        action="store_false",
        help="leave out the audit's huge model-config sizes (10**9 layers, 10**30 experts, ...)",
    )
    args = ap.parse_args(argv)
    rep = run(
        args.requests, args.threads, args.seed, args.max_seconds, args.server_memory_gib, args.sizes
    )
    print(f"{rep.requests} requests in {rep.seconds:.0f} s ({rep.requests / rep.seconds:.0f}/s), "
          f"{args.threads} clients; server peak RSS {rep.peak_rss_mib:.0f} MiB, final "
          f"{rep.final_rss_mib:.0f} MiB; healthy at the end: {rep.healthy}")  # fmt: skip
    print("codes:", dict(rep.codes.most_common()))
    for rpc in RPCS:
        print(f"  {rpc:<13}", dict(rep.by_rpc[rpc].most_common()))
    bad = collections.Counter(rep.failures)
    for (rpc, category, code), n in bad.most_common(20):
        print(
            f"FAIL {n:>5} × {rpc} ({category}): {code}: {rep.examples[rpc, category, code][:200]}"
        )
    rss_ok = rep.peak_rss_mib <= args.max_rss_mib
    if not rss_ok:
        print(f"FAIL peak RSS {rep.peak_rss_mib:.0f} MiB > {args.max_rss_mib:.0f} MiB")
    return 0 if rep.ok and rss_ok else 1


if __name__ == "__main__":
    sys.exit(main())
