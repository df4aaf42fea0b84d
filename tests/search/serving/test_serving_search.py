"""Serving objectives, TPOT SLA, memory fraction and auto batches in the search (issue 16)."""

from __future__ import annotations

from deepstack import switch_noc

from plena_opt.estimate import Evaluator, Workload
from plena_opt.memory import FixedBandwidthMemory
from plena_opt.models import load_model
from plena_opt.search.request import SearchRequest
from plena_opt.search.run.runner import run_search
from plena_opt.search.serving.serving import goodput

L8 = load_model("llama-3.1-8b")
MEM = FixedBandwidthMemory(2e12, 24 * 2**30, name="fixed")


def factory(batch: int) -> Evaluator:
    return Evaluator(
        L8, switch_noc(4), MEM, Workload(batch_size=batch, input_seq_len=1024, output_seq_len=8)
    )


def test_per_device_objective_tpot_sla_and_goodput():
    req = SearchRequest(
        storage=":memory:",
        sampler="exhaustive",
        batch_sizes=[4, 64],
        objectives=["ttft", "tps-per-device", "tps-per-user"],
        max_tpot_ms=5.0,
    )
    res = run_search(req, evaluator_factory=factory)
    assert res.front and "max_tpot" in res.constraints
    for e in res.front:
        assert e.tps_per_device == e.tps / 4
        assert e.tpot_ms <= 5.0
    doc = goodput(res, req)
    assert doc["goodput_tps_per_device"] == max(e.tps_per_device for e in res.front)


def test_auto_batches_stop_at_the_capacity_bound():
    req = SearchRequest(
        storage=":memory:", sampler="exhaustive", auto_batch=True, memory_fraction=0.5
    )
    res = run_search(req, evaluator_factory=factory)
    assert res.front
    for e in res.front:
        assert e.max_batch is not None and e.plan["batch_size"] <= e.max_batch
    assert any(e.capacity_bound for e in res.front)
    # the largest batch searched is the power of two at or below the largest bound
    top = max(e.max_batch for e in res.front)
    assert max(e.plan["batch_size"] for e in res.front) <= top


def test_sla_at_a_percentile_reads_the_recheck_tails():
    """p50/p90/p99 TTFT from the simulated distribution; TPOT from the mirrored TPS quantile."""
    from plena_opt.api.recheck import recheck_front
    from plena_opt.estimate.problem import EvaluatorInputs
    from plena_opt.search.serving.serving import judge_sla, tail_figures

    req = SearchRequest(
        storage=":memory:",
        sampler="exhaustive",
        batch_sizes=[8],
        objectives=["ttft", "tps-per-device", "tps-per-user"],
        max_tpot_ms=1e6,
        percentile="p99",
    )
    res = run_search(req, evaluator_factory=factory)
    ev = factory(8)
    inputs = EvaluatorInputs(L8, ev.ctx.noc, MEM, ev.workload)
    checks = recheck_front(res, inputs, top_k=1, samples=200, seed=0)
    e, rc = res.front[0], checks[0]
    ratio = e.tps_per_sequence / e.tps
    t50, p50 = tail_figures(e, rc, "p50")
    t90, p90 = tail_figures(e, rc, "p90")
    t99, p99 = tail_figures(e, rc, "p99")
    assert (t50, t90, t99) == (rc.ttft_p50_seconds, rc.serving.ttft.p90, rc.ttft_p99_seconds)
    assert p99 == 1 / (rc.tps_p01 * ratio) and p90 == 1 / (rc.serving.tps_p10 * ratio)
    assert t50 <= t90 <= t99 and p50 <= p90 <= p99
    tight = req.model_copy(update={"max_ttft_ms": (t50 + t99) / 2 * 1e3})  # the flag is ms
    (v,) = judge_sla(res, checks, tight)
    assert not v.meets  # the p99 TTFT misses a limit the median meets
    assert judge_sla(res, checks, tight.model_copy(update={"percentile": "p50"}))[0].meets


def test_percentile_without_recheck_is_refused(capsys):
    from plena_opt.cli.main import main

    rc = main(["search", "--percentile", "p90", "--recheck", "0", "--storage", ":memory:"])
    assert rc == 2 and "--percentile p90 judges the SLA" in capsys.readouterr().err


def test_disaggregated_workers_respect_the_memory_fraction():
    from plena_opt.estimate.problem import EvaluatorInputs
    from plena_opt.search.serving.disaggregated import ServingSpace

    ev = factory(8)
    inputs = EvaluatorInputs(L8, switch_noc(4), MEM, ev.workload)
    full = ServingSpace.build(inputs, [8, 512], {}, memory_fraction=None)
    tight = ServingSpace.build(inputs, [8, 512], {}, memory_fraction=0.4)
    assert all(w.max_batch is not None for w in tight.workers)
    n_full = sum(w.fits is not False for w in full.workers)
    n_tight = sum(w.fits is not False for w in tight.workers)
    assert n_tight < n_full
    assert all(w.batch <= w.max_batch for w in tight.workers if w.fits)
