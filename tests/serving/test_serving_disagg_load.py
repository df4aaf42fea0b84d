"""Disaggregated serving under load (issue 23): the prefill queue over its pool, the KV transfer,
the decode pool batch; ``estimate --prefill-workers … --concurrency``; the shipped disagg rows."""

from __future__ import annotations

import heapq
import json
import random

import pytest

from plena_opt.cli.main import main
from plena_opt.serving import EngineModel, StepModel
from plena_opt.serving.disaggregated import (
    Pools,
    disaggregated_under_load,
    erlang_c,
    prefill_service_seconds,
)


class LinearCosts:
    """Step costs of a made-up engine: prefill a + b·tokens, decode c + d·n (seconds)."""

    host_seconds = 0.0

    def prefill_seconds(self, tokens: float) -> float:
        return 0.004 + 2e-5 * tokens

    def decode_mean_seconds(self, n: int) -> float:
        return 0.005 + 1e-4 * n


def _step(budget: int = 2048) -> StepModel:
    return StepModel(LinearCosts(), EngineModel("test", budget, None, None), gpus=1)  # type: ignore[arg-type]


def test_erlang_c_matches_closed_forms():
    assert erlang_c(1, 0.6) == pytest.approx(0.6)  # M/M/1: Pw = ρ
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)  # M/M/2 at ρ = ½: 2ρ²/(1 + ρ)


def test_a_long_prompt_is_prefilled_in_budget_chunks():
    s = _step(budget=1000)
    assert prefill_service_seconds(s, 2500) == pytest.approx(
        2 * (0.004 + 2e-5 * 1000) + (0.004 + 2e-5 * 500)
    )


def _simulated_wait(lam: float, c: int, service: float, n: int = 40_000) -> float:
    """Mean wait of FIFO M/D/c, by event simulation (seeded)."""
    rng, t, free, total = random.Random(7), 0.0, [0.0] * c, 0.0
    for _ in range(n):
        t += rng.expovariate(lam)
        start = max(t, heapq.heappop(free))
        total += start - t
        heapq.heappush(free, start + service)
    return total / n


@pytest.mark.parametrize(("c", "rho"), [(1, 0.7), (4, 0.8), (8, 0.9)])
def test_the_prefill_queue_wait_agrees_with_an_event_simulation(c, rho):
    """Open loop: the Allen–Cunneen M/D/c wait of the model against a FIFO simulation of the
    same pool (within 20 %; the approximation is known to be good at these loads). One prompt
    per step (a 2000-token prompt, a 2048-token budget), as before batching."""
    step, isl = _step(budget=2048), 2000
    s = prefill_service_seconds(step, isl)
    lam = rho * c / s
    m = disaggregated_under_load(step, step, 0.0, Pools(c, 1, 64, 1), (isl, 64, 0.0),
                                 request_rate=lam)  # fmt: skip
    assert m.prefill_wait_seconds == pytest.approx(_simulated_wait(lam, c, s), rel=0.20)
    assert m.prefill_utilisation == pytest.approx(rho)


def test_ttft_includes_the_prefill_queue_and_fewer_workers_queue_longer():
    step, lengths = _step(), (4000, 256, 0.0)
    few = disaggregated_under_load(step, step, 0.01, Pools(2, 1, 4, 1), lengths, concurrency=64)
    many = disaggregated_under_load(step, step, 0.01, Pools(16, 1, 4, 1), lengths, concurrency=64)
    assert few.prefill_wait_seconds > many.prefill_wait_seconds >= 0
    assert few.ttft_seconds == pytest.approx(
        few.prefill_wait_seconds + few.prefill_seconds + 0.01 + few.tpot_seconds
    )
    assert few.ttft_quantiles_seconds[2] > few.ttft_quantiles_seconds[0]


def test_closed_loop_obeys_littles_law_and_no_client_waits_when_workers_outnumber_them():
    step, osl = _step(), 128
    m = disaggregated_under_load(step, step, 0.002, Pools(8, 1, 2, 1), (1000, osl, 0.0),
                                 concurrency=8)  # fmt: skip
    assert m.prefill_wait_seconds == 0.0
    assert m.request_rate_per_s * m.e2e_seconds == pytest.approx(8, rel=1e-6)
    assert m.decode_batch_per_worker == pytest.approx(
        m.request_rate_per_s * (osl - 1) * m.tpot_seconds / 2, rel=1e-6
    )
    assert m.output_tps_per_gpu == pytest.approx(m.request_rate_per_s * osl / 10)


def test_a_rate_beyond_the_prefill_pool_is_refused_naming_request_rate():
    from plena_opt.errors import PlenaInputError

    step = _step(budget=1000)  # one prompt per step
    cap = 2 / prefill_service_seconds(step, 1000)
    with pytest.raises(PlenaInputError) as err:
        disaggregated_under_load(step, step, 0.0, Pools(2, 1, 2, 1), (1000, 64, 0.0),
                                 request_rate=cap * 1.01)  # fmt: skip
    assert err.value.field == "request_rate"


POOLS = ["estimate", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
         "--input-seq", "4096", "--output-seq", "256", "--concurrency", "32", "--prefill-workers",
         "2", "--prefill-tp", "2", "--decode-workers", "1", "--decode-tp", "4"]  # fmt: skip


def test_estimate_prices_pools_under_load(capsys):
    assert main([*POOLS, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)["serving_under_load"]
    st = doc["steady_state"]
    assert doc["pools"] == {"prefill_workers": 2, "prefill_tp": 2, "decode_workers": 1,
                            "decode_tp": 4} and doc["gpus"] == 8  # fmt: skip
    assert st["ttft_seconds"]["mean"] > st["prefill_wait_seconds"] + st["prefill_seconds"]
    assert 0 < st["kv_transfer_seconds"] < st["prefill_seconds"]
    assert st["ttft_seconds"]["p99"] >= st["ttft_seconds"]["p50"] > 0
    assert main(POOLS) == 0
    assert "Under load, disaggregated (closed loop, 32" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--decode-tp", "0"], "--decode-tp"),
        (["--decode-workers", "4"], "the pools need 20 GPUs"),
    ],
)
def test_bad_pools_are_input_errors(capsys, extra, words):
    argv = list(POOLS)
    flag = extra[0]
    argv[argv.index(flag) + 1] = extra[1]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and words in err and "Traceback" not in err


def test_a_missing_pool_flag_is_named(capsys):
    argv = POOLS[: POOLS.index("--decode-tp")]
    assert main(argv) == 2
    assert "--decode-tp is missing" in capsys.readouterr().err


def test_the_shipped_disagg_rows_are_priced_or_refused_for_their_own_reason():
    """The six rows with worker counts: the one recording its concurrency is priced; the rest
    are refused for what they lack (no concurrency), not for the mode."""
    from plena_opt.validate.serving_rows import read_rows
    from plena_opt.validate.serving_score import _price_row, shipped_serving_csv

    rows = [r for r in read_rows(shipped_serving_csv())
            if r.get("mode") == "disagg" and r.get("prefill_num_workers")]  # fmt: skip
    assert len(rows) == 6
    results = {r.id: _price_row(r, {}, {}) for r in rows}
    assert not [r for r in results.values() if "not modelled yet" in r.reason]
    priced = [r for r in results.values() if r.status == "priced"]
    assert [r.concurrency for r in priced] == ["480"]
    assert priced[0].ttft_ms > 0 and priced[0].tpot_ms > 0
    reasons = {r.reason for r in results.values() if r.status == "refused"}
    # the four Qwen3-32B fp8_block rows price their format now (gemm.fp8_block curves) and
    # are refused for the concurrency they do not record
    assert reasons == {"concurrency is empty"}


class FlatDecode(LinearCosts):
    """A decode step that costs the same at any batch (so a client's decode is a fixed time)."""

    def decode_mean_seconds(self, n: int) -> float:
        return 0.005


def _simulated_closed_loop(c: int, p: int, s: float, think: float, r: float, n: int = 20_000):
    """(mean prefill wait, requests/s) of ``c`` clients over ``p`` FIFO prefill workers: service
    ``s`` and think time ``think`` each drawn within ±r (seeded event simulation)."""
    rng = random.Random(3)
    free = [0.0] * p
    events = [(rng.uniform(0, think), i) for i in range(c)]
    heapq.heapify(events)
    waits, t = [], 0.0
    for done in range(n):
        t, i = heapq.heappop(events)
        start = max(t, heapq.heappop(free))
        end = start + s * (1 + r * (2 * rng.random() - 1))
        heapq.heappush(free, end)
        if done > n // 5:
            waits.append(start - t)
        heapq.heappush(events, (end + think * (1 + r * (2 * rng.random() - 1)), i))
    return sum(waits) / len(waits), n / t


@pytest.mark.parametrize(("c", "p"), [(16, 2), (64, 4), (128, 8)])
def test_the_closed_loop_prefill_queue_agrees_with_an_event_simulation(c, p):
    """Closed loop: the finite-source wait (×(1 + cs²)/2) and the request rate against an event
    simulation of the same clients and pool (wait within 25 %, rate within 3 %; measured −8 to
    −19 % and < 1 %). Poisson arrivals, the open-loop form, overstate this wait ~1.5×."""
    step = StepModel(FlatDecode(), EngineModel("test", 4096, None, None), gpus=1)  # type: ignore[arg-type]
    isl, osl, x, r = 4000, 256, 0.01, 0.8  # one prompt per step
    m = disaggregated_under_load(step, step, x, Pools(p, 1, 4, 1), (isl, osl, r), concurrency=c)
    wait, rate = _simulated_closed_loop(c, p, m.prefill_seconds, x + osl * m.tpot_seconds, r)
    assert m.prefill_wait_seconds == pytest.approx(wait, rel=0.25)
    assert m.request_rate_per_s == pytest.approx(rate, rel=0.03)


def _simulated_bulk(p: int, b: int, step: StepModel, isl: int, r: float,
                    lam: float | None = None, clients: int = 0, think: float = 0.0,
                    n: int = 30_000) -> tuple[float, float]:  # fmt: skip
    """(mean prefill sojourn s, requests/s) of ``p`` FIFO prefill workers that each take up to
    ``b`` waiting prompts per step (a step of their summed tokens, ``step.step_seconds``), under
    Poisson ``lam`` or ``clients`` thinking ``think`` s; lengths within ±r (seeded)."""
    rng, events, queue, idle, order = random.Random(5), [], [], list(range(p)), 0

    def push(t: float, kind: str, what: object) -> None:
        nonlocal order
        order += 1
        heapq.heappush(events, (t, order, kind, what))

    def start(t: float, worker: int) -> None:
        batch = queue[:b]
        del queue[:b]
        end = t + step.step_seconds(sum(f for _, _, f in batch) * isl, 0)
        push(end, "done", (worker, batch))

    if lam is not None:
        push(rng.expovariate(lam), "arrive", 0)
    for i in range(clients):
        push(rng.uniform(0, think), "arrive", i)
    stays, done, t, first = [], 0, 0.0, None
    while done < n:
        t, _, kind, what = heapq.heappop(events)
        if kind == "arrive":
            queue.append((t, what, 1 + r * (2 * rng.random() - 1)))
            if lam is not None:
                push(t + rng.expovariate(lam), "arrive", 0)
            if idle:
                start(t, idle.pop())
            continue
        worker, batch = what
        for arrived, client, _ in batch:
            done += 1
            if done > n // 5:
                first = first or (t, done)
                stays.append(t - arrived)
            if clients:
                push(t + think * (1 + r * (2 * rng.random() - 1)), "arrive", client)
        if queue:
            start(t, worker)
        else:
            idle.append(worker)
    return sum(stays) / len(stays), (done - first[1]) / (t - first[0])


def test_a_prefill_step_batches_what_the_budget_holds_per_attention_dp_rank():
    """``B = ranks · ⌊budget / isl⌋``; SGLang divides its budget over the DP ranks
    (server_args.py); a batch of ``n`` prompts is one step of ``n · isl`` tokens."""
    from types import SimpleNamespace

    from plena_opt.serving.prefill_batch import PrefillBatches

    assert PrefillBatches(_step(budget=4096), 1000).size == 4
    assert PrefillBatches(_step(budget=2048), 2000).size == 1
    ranks = SimpleNamespace(ranks=8)
    for engine, size in (("trtllm", 128), ("sglang", 16)):
        step = StepModel(LinearCosts(), EngineModel(engine, 16384, None, None), gpus=8,  # type: ignore[arg-type]
                         attention_dp=ranks)  # type: ignore[arg-type]  # fmt: skip
        assert PrefillBatches(step, 1000).size == size
    step = StepModel(LinearCosts(), EngineModel("trtllm", 4096, None, None), gpus=8,  # type: ignore[arg-type]
                     attention_dp=ranks)  # type: ignore[arg-type]  # fmt: skip
    long = PrefillBatches(step, 10_000)  # chunked, one prompt per rank, in parallel
    assert long.size == 8 and long.seconds(8) == long.seconds(1)
    assert long.seconds(1) == pytest.approx(prefill_service_seconds(step, 10_000))
    assert PrefillBatches(_step(budget=4096), 1000).seconds(3) == pytest.approx(0.004 + 2e-5 * 3000)


def test_batched_prefill_is_one_prompt_per_step_at_light_load_and_serves_b_per_step_at_full():
    """At light load a prompt is prefilled alone (today's figures); the pool's capacity is
    ``P · B / S(B)`` and a rate beyond it is refused."""
    from plena_opt.errors import PlenaInputError

    lengths = (1000, 64, 0.0)
    batched, alone = _step(budget=4096), _step(budget=1000)
    light = [disaggregated_under_load(s, s, 0.001, Pools(2, 1, 8, 1), lengths, request_rate=0.01)
             for s in (batched, alone)]  # fmt: skip
    assert light[0].prefill_seconds == pytest.approx(light[1].prefill_seconds, rel=1e-3)
    assert light[0].ttft_seconds == pytest.approx(light[1].ttft_seconds, rel=1e-3)
    cap = 2 * 4 / (0.004 + 2e-5 * 4000)
    m = disaggregated_under_load(batched, batched, 0.001, Pools(2, 1, 8, 1), lengths,
                                 request_rate=0.9 * cap)  # fmt: skip
    assert 0.9 * cap > 2 / prefill_service_seconds(batched, 1000)  # beyond one prompt a step
    assert m.prefill_seconds > light[0].prefill_seconds and m.prefill_utilisation < 1
    with pytest.raises(PlenaInputError) as err:
        disaggregated_under_load(batched, batched, 0.0, Pools(2, 1, 8, 1), lengths,
                                 request_rate=cap * 1.01)  # fmt: skip
    assert err.value.field == "request_rate"


@pytest.mark.parametrize(("budget", "p", "rho"),
                         [(4096, 1, 0.5), (4096, 1, 0.8), (4096, 2, 0.9), (8192, 4, 0.7),
                          (8192, 4, 0.95), (2048, 2, 0.8)])  # fmt: skip
def test_the_batched_open_loop_pool_agrees_with_an_event_simulation(budget, p, rho):
    """Open loop, batching pool: the chain's mean prefill sojourn (wait + the batch's step)
    against a bulk-service FIFO simulation (within 35 %; measured −9 to +30 %, the largest at
    one worker and half load, where the chain prices a lone prompt's step as a batch's)."""
    step, isl = _step(budget), 1000
    b = budget // isl
    lam = rho * p * b / (0.004 + 2e-5 * isl * b)
    m = disaggregated_under_load(step, step, 0.0, Pools(p, 1, 64, 1), (isl, 64, 0.0),
                                 request_rate=lam)  # fmt: skip
    stay, rate = _simulated_bulk(p, b, step, isl, 0.0, lam=lam)
    assert m.prefill_wait_seconds + m.prefill_seconds == pytest.approx(stay, rel=0.35)


@pytest.mark.parametrize(("c", "p", "budget"),
                         [(16, 2, 8192), (64, 4, 8192), (128, 8, 8192), (256, 2, 16384),
                          (64, 1, 4096)])  # fmt: skip
def test_the_batched_closed_loop_pool_agrees_with_an_event_simulation(c, p, budget):
    """Closed loop, batching pool, lengths ±80 %: mean prefill sojourn within 10 % and the request
    rate within 2 % of a bulk-service simulation (measured −6 to +1 % and < 1 %; the saturated
    256-client pool by Little's law)."""
    step = StepModel(FlatDecode(), EngineModel("test", budget, None, None), gpus=1)  # type: ignore[arg-type]
    isl, osl, x, r = 1000, 256, 0.01, 0.8
    m = disaggregated_under_load(step, step, x, Pools(p, 1, 4, 1), (isl, osl, r), concurrency=c)
    stay, rate = _simulated_bulk(p, budget // isl, step, isl, r, clients=c,
                                 think=x + osl * m.tpot_seconds)  # fmt: skip
    assert m.prefill_wait_seconds + m.prefill_seconds == pytest.approx(stay, rel=0.10)
    assert m.request_rate_per_s == pytest.approx(rate, rel=0.02)
