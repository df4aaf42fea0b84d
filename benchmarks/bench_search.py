"""Search benchmarks (issue 5): exact-front wall time, sampled-front quality, study storage.

Run: ``.venv/bin/python benchmarks/bench_search.py [--part exact|sampled|storage|all]``.
Figures and the command are recorded in benchmarks/README_search.md.

* exact: wall time of the exact front for llama-3.1-70b on illustrative_gpu_cluster_32 with
  batch sizes 1,4,16,64,256 (``run_search`` with the exhaustive sampler, journal store on disk).
* sampled: on torus-mesh-switch profiles of ``--devices`` (default 1,024 and 4,096: the 64-device
  illustrative profile with L3 and L2 grown as bench_scale.py grows them), the exhaustive front of
  each ``--models`` model (batch sizes 16,64,256,1024) versus TPE given 10 % of the exhaustive
  evaluations, per seed, twice side by side: the sampler alone (``sampled.SAMPLER_SHARE = 1.0``,
  as before the local refinement) and sampler + refinement; hypervolume ratio, front recall, IGD
  (on the exact front's normalisation), refinement evaluations and evaluations until recall 0.95.
* storage: JournalFileBackend vs SQLite — ask/tell and bulk-add throughput, trials surviving a
  SIGKILL, four processes sharing one study, and whether optuna-dashboard lists the study.
* store: what storing scored points costs inside ``run_search`` (time in ``_Search.add_records``
  per point; in-memory vs journal file vs SQLite), and the wall time of an exhaustive search of
  16 batch sizes on 1,024 devices with the journal store. Run it with ``PYTHONPATH`` pointing at
  another checkout to measure that version side by side (the probe wraps a method both have).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, make_server

import optuna

from plena_opt.estimate.problem import ProblemSpec
from plena_opt.search.request import SearchRequest
from plena_opt.search.run.runner import run_search
from plena_opt.search.space.objectives import parse_objectives
from plena_opt.search.storage.storage import open_storage

optuna.logging.set_verbosity(optuna.logging.ERROR)


def noc_1024():
    """The illustrative torus-mesh-switch grown to 1,024 devices: 4×4 torus · 4×4 mesh · 4 ports
    (DeepStack ``torus_mesh_switch`` preset, same link figures as the 64-device profile)."""
    from deepstack.presets import torus_mesh_switch

    noc = torus_mesh_switch((4, 4), (4, 4), 4)
    assert noc.num_devices == 1024
    return noc


def bench_exact() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        req = SearchRequest(
            problem=ProblemSpec(model="llama-3.1-70b", noc="illustrative_gpu_cluster_32"),
            batch_sizes=[1, 4, 16, 64, 256],
            sampler="exhaustive",
            storage=str(Path(tmp) / "s.log"),
        )
        t = time.perf_counter()
        res = run_search(req)
        wall = time.perf_counter() - t
    out = {"legal_points": res.legal_points, "front": len(res.front), "wall_s": round(wall, 2)}
    print("exact llama-3.1-70b / 32 devices / batches 1,4,16,64,256:", out, flush=True)
    return out


def noc_tms(devices: int):
    """The torus-mesh-switch grown to ``devices`` the way bench_scale.py grows it (mesh and torus
    sides doubled in turn from 2×2 · 2×2 · 4 ports): 1,024 → 4×4 · 4×4, 4,096 → 8×4 · 8×4."""
    from deepstack.presets import torus_mesh_switch

    if devices == 1024:
        return noc_1024()
    torus, mesh, step = [2, 2], [2, 2], 0
    while torus[0] * torus[1] * mesh[0] * mesh[1] * 4 < devices:
        (mesh if step % 2 == 0 else torus)[(step // 2) % 2] *= 2
        step += 1
    noc = torus_mesh_switch(tuple(torus), tuple(mesh), 4)
    assert noc.num_devices == devices, devices
    return noc


def _refine_counter() -> dict:
    """Count the plans the local refinement scores (wraps ``SampledRun.refine``)."""
    from plena_opt.search.run import sampled

    acc = {"n": 0}
    original = sampled.SampledRun.refine

    def counted(self, limit):
        before = self.s.evaluated
        try:
            return original(self, limit)
        finally:
            acc["n"] += self.s.evaluated - before

    sampled.SampledRun.refine = counted
    return acc


def _sampled_run(base: dict, exact, inputs, budget: int, seed: int, share: float, acc: dict):
    """One TPE run with ``sampled.SAMPLER_SHARE = share`` (1.0: the sampler alone, as before the
    refinement existed — the same suggestions), rated against the exact front."""
    from plena_opt.search.fronts.quality import front_quality
    from plena_opt.search.run import sampled

    sampled.SAMPLER_SHARE, acc["n"] = share, 0
    t = time.perf_counter()
    r = run_search(
        SearchRequest(**base, sampler="tpe", trials=budget, seed=seed,
                      study=f"s{seed}-{share}", compare_exact=False),
        evaluator_factory=inputs.evaluator,
    )  # fmt: skip
    wall = time.perf_counter() - t
    q = front_quality(pts(r.front), [e.label for e in r.front], pts(exact.front),
                      [e.label for e in exact.front])  # fmt: skip
    return {
        "evaluations": r.evaluated,
        "refined": acc["n"],
        "trials": r.trials,
        "hv_ratio": round(q.hv_ratio, 5),
        "front_recall": round(q.front_recall, 3),
        "found": round(q.front_recall * len(exact.front)),
        "igd": round(q.igd, 4) if q.igd is not None else None,
        "evals_to_recall_0.95": _evals_to_recall(r.scored, exact.front, 0.95),
        "wall_s": round(wall, 1),
    }


def _evals_to_recall(scored: list, front: list, target: float) -> int | None:
    """How many evaluations (in scoring order) it took until ``target`` of the exact front's plans
    had been scored (an exact-front plan is on the front of any set that contains it)."""
    need = math.ceil(target * len(front) - 1e-9)
    keys = {e.label for e in front}
    for i, e in enumerate(scored, 1):
        need -= e.label in keys
        if need <= 0:
            return i
    return None


def bench_sampled(models: list[str], seeds: int, devices: list[int]) -> dict:
    """Exact front vs TPE with 10 % of the evaluations, sampler alone (before) and sampler +
    local refinement (after), side by side in one process, per model, device count and seed."""
    from plena_opt.estimate.problem import EvaluatorInputs
    from plena_opt.search.run import sampled

    acc = _refine_counter()
    share = sampled.SAMPLER_SHARE
    batches = [16, 64, 256, 1024]
    out = {}
    for n in devices:
        noc = noc_tms(n)
        for model in models:
            spec = ProblemSpec(model=model, noc="illustrative_gpu_cluster_32")
            loaded = spec.load()
            inputs = EvaluatorInputs(loaded.model, noc, loaded.memory, loaded.workload, loaded.chip)
            base = dict(problem=spec, batch_sizes=batches, storage=":memory:")
            t = time.perf_counter()
            exact = run_search(
                SearchRequest(**base, sampler="exhaustive", study="exact"),
                evaluator_factory=inputs.evaluator,
            )
            exact_s = time.perf_counter() - t
            budget = exact.evaluated // 10
            runs = [
                {
                    "seed": seed,
                    "before": _sampled_run(base, exact, inputs, budget, seed, 1.0, acc),
                    "after": _sampled_run(base, exact, inputs, budget, seed, share, acc),
                }
                for seed in range(seeds)
            ]
            sampled.SAMPLER_SHARE = share
            row = {
                "legal_points": exact.legal_points,
                "exact_front": len(exact.front),
                "exhaustive_s": round(exact_s, 1),
                "budget": budget,
                "runs": runs,
            }
            out[f"{model}@{n}"] = row
            print(model, n, json.dumps(row), f"load {os.getloadavg()[0]:.1f}", flush=True)
    return out


FIELDS = ("ttft_ms", "tps", "energy_j_per_token")


def pts(entries: list) -> list:
    """Minimisation vectors (TTFT, −TPS, J/token) of front entries."""
    objs = parse_objectives(None)
    return [[o.sign * getattr(e, f) for o, f in zip(objs, FIELDS, strict=True)] for e in entries]


# -- storage ------------------------------------------------------------------------------------


def _objective(trial: optuna.Trial) -> float:
    return trial.suggest_float("x", 0, 1) ** 2


def _worker(url: str, n: int, q: mp.Queue) -> None:
    try:
        study = optuna.load_study(
            study_name="mp", storage=open_storage(url), sampler=optuna.samplers.RandomSampler()
        )
        for _ in range(n):
            t = study.ask()
            study.tell(t, _objective(t))
        q.put(("ok", n))
    except Exception as exc:  # reported, not raised: the benchmark counts failures
        q.put(("error", repr(exc)))


CRASH_CHILD = """
import sys, optuna
from plena_opt.search.storage.storage import open_storage
optuna.logging.set_verbosity(optuna.logging.ERROR)
study = optuna.create_study(study_name="crash", storage=open_storage(sys.argv[1]),
                            sampler=optuna.samplers.RandomSampler(0), load_if_exists=True)
while True:
    t = study.ask()
    study.tell(t, t.suggest_float("x", 0, 1))
    print(t.number, flush=True)
"""


class _Quiet(WSGIRequestHandler):
    def log_message(self, *a: object) -> None:
        pass


def bench_storage_one(url: str) -> dict:
    res: dict = {}
    storage = open_storage(url)
    study = optuna.create_study(
        study_name="speed", storage=storage, sampler=optuna.samplers.RandomSampler(0)
    )
    t = time.perf_counter()
    study.optimize(_objective, n_trials=200)
    res["ask_tell_trials_per_s"] = round(200 / (time.perf_counter() - t), 1)
    dist = {"x": optuna.distributions.FloatDistribution(0, 1)}
    trials = [
        optuna.trial.create_trial(
            params={"x": i / 1000},
            distributions=dist,
            value=i,
            user_attrs={"plan": {"tp": 1}, "metrics": {"a": 1.0}},
        )
        for i in range(1000)
    ]
    t = time.perf_counter()
    study.add_trials(trials)
    res["bulk_add_trials_per_s"] = round(1000 / (time.perf_counter() - t), 1)

    # crash: SIGKILL a writer; every trial it reported as told must be in the store
    proc = subprocess.Popen(
        [sys.executable, "-c", CRASH_CHILD, url], stdout=subprocess.PIPE, text=True
    )
    told = []
    t0 = time.time()
    while time.time() - t0 < 3:
        line = proc.stdout.readline()
        if line:
            told.append(int(line))
    proc.send_signal(signal.SIGKILL)
    rest, _ = proc.communicate()
    told += [int(x) for x in rest.split()]
    stored = optuna.load_study(study_name="crash", storage=open_storage(url)).trials
    complete = {t.number for t in stored if t.state == optuna.trial.TrialState.COMPLETE}
    res["crash_told"] = len(told)
    res["crash_lost"] = len(set(told) - complete)

    # four processes on one study
    optuna.create_study(study_name="mp", storage=open_storage(url))
    q: mp.Queue = mp.Queue()
    procs = [mp.Process(target=_worker, args=(url, 50, q)) for _ in range(4)]
    t = time.perf_counter()
    for p in procs:
        p.start()
    outcomes = [q.get(timeout=300) for _ in procs]
    for p in procs:
        p.join()
    res["multiprocess_s"] = round(time.perf_counter() - t, 2)
    res["multiprocess_errors"] = [o[1] for o in outcomes if o[0] == "error"]
    mp_trials = optuna.load_study(study_name="mp", storage=open_storage(url)).trials
    res["multiprocess_complete"] = sum(
        t.state == optuna.trial.TrialState.COMPLETE for t in mp_trials
    )

    # dashboard
    from optuna_dashboard import wsgi

    server = make_server("127.0.0.1", 0, wsgi(open_storage(url)), handler_class=_Quiet)
    th = threading.Thread(target=server.serve_forever, daemon=True)
    th.start()
    try:
        api = f"http://127.0.0.1:{server.server_port}/api/studies"
        names = [s["study_name"] for s in json.load(urllib.request.urlopen(api))["study_summaries"]]
        res["dashboard_lists"] = sorted(names)
    finally:
        server.shutdown()
        server.server_close()
    return res


def bench_storage() -> dict:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, url in [
            ("journal", os.path.join(tmp, "s.log")),
            ("sqlite", f"sqlite:///{os.path.join(tmp, 's.db')}"),
        ]:
            out[name] = bench_storage_one(url)
            print(name, json.dumps(out[name]), flush=True)
    return out


STORE_BATCHES = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024]


def _timed_store() -> dict:
    """Wrap ``_Search.add_records`` to add up its time and the points it stores."""
    from plena_opt.search.run import session

    acc = {"s": 0.0, "points": 0}
    original = session._Search.add_records

    def timed(self, recs, *a, **kw):
        t = time.perf_counter()
        try:
            return original(self, recs, *a, **kw)
        finally:
            acc["s"] += time.perf_counter() - t
            acc["points"] += len(recs)

    session._Search.add_records = timed
    return acc


def bench_store() -> dict:
    acc = _timed_store()
    out: dict = {}
    spec = ProblemSpec(model="llama-3.1-70b", noc="illustrative_gpu_cluster_32")
    with tempfile.TemporaryDirectory() as tmp:
        stores = [
            ("memory", ":memory:"),
            ("journal", os.path.join(tmp, "s.log")),
            ("sqlite", f"sqlite:///{os.path.join(tmp, 's.db')}"),
        ]
        for name, url in stores:
            acc.update(s=0.0, points=0)
            req = SearchRequest(problem=spec, batch_sizes=[1, 4, 16, 64, 256],
                                sampler="exhaustive", storage=url, study="store")  # fmt: skip
            t = time.perf_counter()
            res = run_search(req)
            out[name] = {
                "points": acc["points"],
                "store_ms_per_point": round(1e3 * acc["s"] / max(acc["points"], 1), 3),
                "wall_s": round(time.perf_counter() - t, 2),
                "front": len(res.front),
            }
            print("store", name, json.dumps(out[name]), flush=True)
        noc = noc_1024()
        from plena_opt.estimate.problem import EvaluatorInputs

        loaded = spec.load()
        inputs = EvaluatorInputs(loaded.model, noc, loaded.memory, loaded.workload, loaded.chip)
        acc.update(s=0.0, points=0)
        req = SearchRequest(problem=spec, batch_sizes=STORE_BATCHES, sampler="exhaustive",
                            storage=os.path.join(tmp, "big.log"), study="big")  # fmt: skip
        t = time.perf_counter()
        res = run_search(req, evaluator_factory=inputs.evaluator)
        out["batches16_1024dev"] = {
            "points": res.legal_points,
            "wall_s": round(time.perf_counter() - t, 2),
            "store_s": round(acc["s"], 2),
            "store_ms_per_point": round(1e3 * acc["s"] / max(acc["points"], 1), 3),
            "front": len(res.front),
        }
        print("store 16 batch sizes, 1,024 devices:", json.dumps(out["batches16_1024dev"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--part", default="all", choices=["exact", "sampled", "storage", "store", "all"]
    )
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--models", default="gpt-oss-120b,qwen3-235b-a22b")
    ap.add_argument("--devices", default="1024,4096", help="sampled part: device counts")
    args = ap.parse_args()
    if args.part in ("exact", "all"):
        bench_exact()
    if args.part in ("storage", "all"):
        bench_storage()
    if args.part in ("store", "all"):
        bench_store()
    if args.part in ("sampled", "all"):
        bench_sampled(args.models.split(","), args.seeds, [int(x) for x in args.devices.split(",")])


if __name__ == "__main__":
    main()
