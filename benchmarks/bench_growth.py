"""How the default search grows with the cluster and the model (issue 26).

Each row is one ``plena-opt search`` on its defaults (sampler ``auto``, 200 trials, re-check of
the 5 best plans with 1,000 samples, the embedded study file in a temporary folder) run by
``plena_opt.cli.main.main`` in a fresh child process, for

* devices: 8, 32, 64, 128, 512, 2,048, 8,192, 32,768, 65,536 on the ``bench_scale.py`` switch
  hierarchy (8-port nodes, pods of ≤ 32 nodes, a top switch; made-up link figures), with the
  catalog's dense ``llama-3.1-70b`` and MoE ``qwen3-235b-a22b``;
* layers: the same two models' HF configs with ``num_hidden_layers`` set to 20 … 640, on 64
  devices.

Per row: the sampler ``auto`` chose, legal plans, plans scored, CPU and wall seconds of the whole
command (``search_cpu_s``, imports excluded), of which the re-check (``recheck_cpu_s``), and
``os.getloadavg()`` right after the row. Exponents are least-squares slopes of log(CPU s) over
log(devices or layers). ``--quick``: devices up to 8,192 and layers 20, 80, 320 (one model
each). ``--tpe-overhead`` measures the TPE cost per budgeted trial that
``plena_opt.search.run.modes.TPE_CPU_SECONDS_PER_TRIAL`` records, ``--plan-cost`` the per-plan
evaluator cost behind ``PLAN_CPU_SECONDS``. Prints a text table, then one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

MODELS = ("llama-3.1-70b", "qwen3-235b-a22b")
DEVICES = (8, 32, 64, 128, 512, 2048, 8192, 32768, 65536)
QUICK_DEVICES = (32, 128, 512, 2048, 8192)
LAYERS = (20, 40, 80, 160, 320, 640)
QUICK_LAYERS = (20, 80, 320)
LAYER_DEVICES = 64


def _noc_file(n: int, folder: Path) -> str:
    from bench_scale import switch_profile

    path = folder / f"switch-{n}.json"
    path.write_text(json.dumps(switch_profile(n).to_dict()))
    return str(path)


def _model_args(model: str, layers: int | None, folder: Path) -> list[str]:
    if layers is None:
        return ["--model", model]
    from plena_opt.models import catalog

    src = Path(catalog.__file__).parent / "configs" / f"{model}.json"
    cfg = json.loads(src.read_text())
    cfg["num_hidden_layers"] = layers
    for key in ("layer_types", "mlp_only_layers"):  # per-layer lists follow the count
        if isinstance(cfg.get(key), list) and cfg[key]:
            cfg[key] = (cfg[key] * math.ceil(layers / len(cfg[key])))[:layers]
    path = folder / f"{model}-{layers}.json"
    path.write_text(json.dumps(cfg))
    return ["--model-path", str(path)]


def child(model: str, devices: int, layers: int | None) -> dict:
    """One default search in this process (a fresh interpreter); imports are not counted."""
    t_imp = time.process_time()
    import plena_opt.api as api
    from plena_opt.cli.main import main
    from plena_opt.search.run import runner

    import_cpu = time.process_time() - t_imp
    spent = {"recheck_cpu_s": 0.0}
    chosen: dict = {}
    real_recheck, real_run = api.recheck_front, runner.run_search

    def recheck(*a, **k):
        c = time.process_time()
        try:
            return real_recheck(*a, **k)
        finally:
            spent["recheck_cpu_s"] += time.process_time() - c

    def run(*a, **k):
        res = real_run(*a, **k)
        chosen.update(sampler=res.sampler, legal=res.legal_points, evaluated=res.evaluated)
        return res

    api.recheck_front, runner.run_search = recheck, run  # both looked up at call time
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        args = ["search", *_model_args(model, layers, folder), "--noc", _noc_file(devices, folder)]
        os.chdir(folder)
        c, t = time.process_time(), time.perf_counter()
        with open(os.devnull, "w") as null:
            out, sys.stdout = sys.stdout, null
            try:
                code = main([*args, "--quiet"])
            finally:
                sys.stdout = out
        cpu, wall = time.process_time() - c, time.perf_counter() - t
    return {
        "model": model,
        "devices": devices,
        "layers": layers,
        "exit": code,
        **chosen,
        "search_cpu_s": round(cpu, 3),
        "search_wall_s": round(wall, 3),
        "recheck_cpu_s": round(spent["recheck_cpu_s"], 3),
        "import_cpu_s": round(import_cpu, 3),
        "load": [round(x, 2) for x in os.getloadavg()],
    }


def plan_cost() -> dict:
    """CPU seconds per plan of a fresh evaluator over every legal plan (routes already built by a
    first evaluator), both models × 32, 512, 8,192 switch devices; the median of the rows."""
    from bench_scale import switch_profile

    from plena_opt.estimate import Evaluator, Workload
    from plena_opt.memory import load_memory
    from plena_opt.models import load_model

    rows = []
    for model in MODELS:
        for n in (32, 512, 8192):
            noc, m, mem = (
                switch_profile(n),
                load_model(model),
                load_memory("fictional_stacked_dram"),
            )
            plans = Evaluator(m, noc, mem, Workload()).legal_plans()
            Evaluator(m, noc, mem, Workload()).evaluate_batch(plans)  # routes built
            fresh = Evaluator(m, noc, mem, Workload())
            c = time.process_time()
            fresh.evaluate_batch(plans)
            per = (time.process_time() - c) / len(plans)
            rows.append({"model": model, "devices": n, "plans": len(plans), "cpu_s": per})
            print(json.dumps(rows[-1] | {"load": os.getloadavg()[0]}), file=sys.stderr)
    per_plan = sorted(r["cpu_s"] for r in rows)
    return {"rows": rows, "median_cpu_s_per_plan": per_plan[len(per_plan) // 2]}


def tpe_overhead(seeds: int = 3) -> dict:
    """TPE's own CPU seconds per budgeted trial: a 200-trial TPE search of llama-3.1-70b on
    1,024 switch devices with 4 batch sizes (no exact comparison), its CPU minus the CPU spent
    in ``_Search.score``, over the plans scored; median over ``seeds`` seeds."""
    import optuna
    from bench_scale import switch_profile

    from plena_opt.estimate.problem import InlineDocument, ProblemSpec
    from plena_opt.search.request import SearchRequest
    from plena_opt.search.run import session
    from plena_opt.search.run.runner import run_search

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    noc = InlineDocument(document=switch_profile(1024).to_dict(), name="switch-1024")
    problem = ProblemSpec(model="llama-3.1-70b", noc=noc)
    spent = {"score": 0.0}
    real = session._Search.score

    def score(self, points):
        c = time.process_time()
        try:
            return real(self, points)
        finally:
            spent["score"] += time.process_time() - c

    session._Search.score = score
    rows = []
    for seed in range(seeds):
        req = SearchRequest(
            problem=problem,
            batch_sizes=[4, 16, 64, 256],
            sampler="tpe",
            trials=200,
            seed=seed,
            compare_exact=False,
            storage=":memory:",
        )
        spent["score"] = 0.0
        c = time.process_time()
        res = run_search(req)
        total = time.process_time() - c
        per = (total - spent["score"]) / res.evaluated
        rows.append({"seed": seed, "legal": res.legal_points, "evaluated": res.evaluated,
                     "repeats": res.repeats, "pruned": res.pruned_illegal, "cpu_s": total,
                     "score_cpu_s": spent["score"], "tpe_cpu_s_per_trial": per,
                     "load": os.getloadavg()[0]})  # fmt: skip
        print(json.dumps(rows[-1]), file=sys.stderr)
    per_trial = sorted(r["tpe_cpu_s_per_trial"] for r in rows)
    return {"rows": rows, "median_tpe_cpu_s_per_trial": per_trial[len(per_trial) // 2]}


def recheck_cost(sizes: tuple[int, ...] = (32, 1024, 8192)) -> dict:
    """The re-check's CPU per plan (``api.recheck``'s cost model): each of the top 5 front plans
    of the default search (both models × ``sizes`` switch devices) is estimated and re-checked
    with 0 samples with no window cached (``cold0``), again (``warm0``) and with 1,000 samples
    (``warm1000``). Per plan: fixed = estimate + ``warm0`` of the plans of < 100 ops; per built
    op = (``cold0`` − fixed) / built ops; per op and sample = (``warm1000`` − ``warm0``) /
    (1,000 × sampled ops) (``simulator.engine.serving.recheck_ops``); medians over the plans of
    ≥ 1,000 ops."""
    import optuna
    from bench_scale import switch_profile

    from plena_opt import api
    from plena_opt.estimate.plan import Plan
    from plena_opt.estimate.problem import InlineDocument, ProblemSpec
    from plena_opt.search.request import SearchRequest
    from plena_opt.simulator.engine import serving
    from plena_opt.simulator.engine.recheck import recheck_plans
    from plena_opt.simulator.scheduler.inference import stage_times_from_estimate

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    rows = []
    for model in MODELS:
        for n in sizes:
            noc = InlineDocument(document=switch_profile(n).to_dict(), name=f"switch-{n}")
            spec = ProblemSpec(model=model, noc=noc)
            problem = spec.load()
            res = api.search_plans(SearchRequest(problem=spec, storage=":memory:"), problem)
            for e in res.front[:5]:
                serving._cache.clear()
                t = [time.process_time()]
                est = problem.evaluator(e.plan["batch_size"]).estimate(Plan.from_dict(e.plan))
                doc = est.to_dict()
                t.append(time.process_time())
                for samples in (0, 0, 1000):
                    recheck_plans([doc], samples=samples)
                    t.append(time.process_time())
                built, sampled = serving.recheck_ops(stage_times_from_estimate(doc, 64))
                est_s, cold0, warm0, warm1000 = (b - a for a, b in zip(t, t[1:], strict=False))
                rows.append({"model": model, "devices": n, "plan": e.label, "built_ops": built,
                             "sampled_ops": sampled, "estimate_s": est_s, "cold0_s": cold0,
                             "warm0_s": warm0, "warm1000_s": warm1000,
                             "load": round(os.getloadavg()[0], 2)})  # fmt: skip
                print(json.dumps(rows[-1]), file=sys.stderr)
    small = sorted(r["estimate_s"] + r["warm0_s"] for r in rows if r["built_ops"] < 100)
    fixed = small[len(small) // 2]
    big = [r for r in rows if r["built_ops"] >= 1000]
    per_op = sorted((r["estimate_s"] + r["cold0_s"] - fixed) / r["built_ops"] for r in big)
    per_sample = sorted((r["warm1000_s"] - r["warm0_s"]) / (1000 * r["sampled_ops"]) for r in big)
    return {
        "rows": rows,
        "fixed_cpu_s_per_plan": fixed,
        "median_cpu_s_per_built_op": per_op[len(per_op) // 2] if per_op else None,
        "median_cpu_s_per_op_sample": per_sample[len(per_sample) // 2] if per_sample else None,
    }


def run_child(model: str, devices: int, layers: int | None, timeout: float) -> dict:
    cmd = [sys.executable, str(Path(__file__)), "--child", model, str(devices), str(layers or 0)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"model": model, "devices": devices, "layers": layers, "timeout_s": timeout}
    lines = out.stdout.strip().splitlines()
    if out.returncode or not lines:
        return {"model": model, "devices": devices, "layers": layers, "error": out.stderr[-400:]}
    return json.loads(lines[-1])


def exponent(rows: list[dict], x: str, y: str = "search_cpu_s") -> float | None:
    """Least-squares slope of log(y) over log(x)."""
    pts = [(math.log(r[x]), math.log(r[y])) for r in rows if r.get(y, 0) > 0 and r.get(x)]
    if len(pts) < 2:
        return None
    mx = sum(a for a, _ in pts) / len(pts)
    my = sum(b for _, b in pts) / len(pts)
    sxx = sum((a - mx) ** 2 for a, _ in pts)
    return round(sum((a - mx) * (b - my) for a, b in pts) / sxx, 2) if sxx else None


def table(rows: list[dict]) -> str:
    head = (
        f"{'model':<17}{'devices':>8}{'layers':>7}{'sampler':>11}{'legal':>7}{'scored':>7}"
        f"{'CPU s':>8}{'wall s':>8}{'recheck':>8}   load (1/5/15 min)"
    )
    lines = [head]
    for r in rows:
        if "search_cpu_s" not in r:
            lines.append(f"{r['model']:<17}{r['devices']:>8}{r['layers'] or '':>7}  {r}")
            continue
        lines.append(
            f"{r['model']:<17}{r['devices']:>8}{r['layers'] or '':>7}{r.get('sampler', '?'):>11}"
            f"{r.get('legal', 0):>7}{r.get('evaluated', 0):>7}{r['search_cpu_s']:>8.2f}"
            f"{r['search_wall_s']:>8.2f}{r['recheck_cpu_s']:>8.2f}   {r['load']}"
        )
    return "\n".join(lines)


TARGET_CPU_S, SMALL_TARGET_CPU_S, SMALL_DEVICES = 5.0, 2.0, 64  # issue 26's targets


def markdown(rows: list[dict]) -> str:
    """The README's speed table: search CPU s per (model, devices), the target, the load."""
    lines = ["| model | devices | sampler | plans scored | search CPU s | target | load (1 min) |",
             "| --- | ---: | --- | ---: | ---: | --- | ---: |"]  # fmt: skip
    for r in rows:
        if r.get("layers") or "search_cpu_s" not in r:
            continue
        target = SMALL_TARGET_CPU_S if r["devices"] <= SMALL_DEVICES else TARGET_CPU_S
        met = "met" if r["search_cpu_s"] < target else "**not met**"
        cells = (
            r["model"],
            f"{r['devices']:,}",
            r["sampler"],
            f"{r['evaluated']:,}",
            f"{r['search_cpu_s']:.2f}",
            f"< {target:g} s {met}",
            f"{r['load'][0]:.1f}",
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="fewer sizes (see the module doc)")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated catalog names")
    ap.add_argument("--devices", help="comma-separated device counts (default: see module doc)")
    ap.add_argument("--layers", help="comma-separated layer counts ('' for none)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per row")
    ap.add_argument("--tpe-overhead", action="store_true", help="measure TPE's cost per trial")
    ap.add_argument("--plan-cost", action="store_true", help="measure the evaluator per plan")
    ap.add_argument("--recheck-cost", action="store_true", help="measure the re-check per plan")
    ap.add_argument("--markdown", action="store_true", help="also print the README's speed table")
    args = ap.parse_args()
    if args.child:
        m, n, layers = args.child
        print(json.dumps(child(m, int(n), int(layers) or None)))
        return
    if args.recheck_cost:
        print(json.dumps(recheck_cost(), indent=1))
        return
    if args.tpe_overhead or args.plan_cost:
        print(json.dumps(tpe_overhead() if args.tpe_overhead else plan_cost(), indent=1))
        return
    models = args.models.split(",")
    devs = QUICK_DEVICES if args.quick else DEVICES
    lays = QUICK_LAYERS if args.quick else LAYERS
    if args.devices is not None:
        devs = tuple(int(x) for x in args.devices.split(",") if x)
    if args.layers is not None:
        lays = tuple(int(x) for x in args.layers.split(",") if x)
    by_dev = [run_child(m, n, None, args.timeout) for m in models for n in devs]
    layer_models = models[:1] if args.quick else models
    by_layer = [run_child(m, LAYER_DEVICES, k, args.timeout) for m in layer_models for k in lays]
    rows = by_dev + by_layer
    fits = {
        f"{m} cpu~devices^": exponent([r for r in by_dev if r["model"] == m], "devices")
        for m in models
    } | {
        f"{m} cpu~layers^": exponent([r for r in by_layer if r["model"] == m], "layers")
        for m in layer_models
    }
    print(table(rows))
    print("fitted exponents (log-log least squares of CPU s):", fits)
    if args.markdown:
        print(markdown(rows))
    print(json.dumps({"rows": rows, "exponents": fits, "argv": sys.argv[1:]}))


if __name__ == "__main__":
    main()
