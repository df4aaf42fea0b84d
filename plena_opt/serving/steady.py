"""Closed-loop steady state of a continuous-batching engine: a fixed point, no replay.

``C`` clients (at most ``max_running`` of them admitted; the rest wait) each cycle through TTFT then
``osl − 1`` decode steps, so a request spends the share ``φ = (osl − 1)·TPOT / E2E`` of its cycle
decoding. Seen from one request:

* while it decodes, the others decode ``(C − 1)·φ`` on average, and their prompts bring
  ``p = (C − 1)·φ·isl / (osl − 1)`` prompt tokens per step (each finished request is replaced by
  a new prompt); a step carries prompt work in a share ``min(1, p / chunk)`` of the steps, each of
  ``max(p, chunk)`` tokens (``chunk`` = min(isl, room left by the decodes)). TPOT is that mean step,
  its prompt part as the decoders see it: the chunk's kernels or the part of its eager host
  dispatch that the device work in flight does not hide (``serving.host_overlap``), and with
  TensorRT-LLM's attention-DP balancing ``g`` ranks' chunks in one step (``serving.adp_prefill``).
* its prompt takes ``k = max(1, isl / room)`` steps of ``chunk + p`` prompt tokens (capped at
  the room) beside the others' decodes, stretched by the wait for room when others' prompts
  fill a share ``u = p / room`` of it (deterministic-service single queue: ``1 + u / (2(1 − u))``),
  after the step the engine started while the request was on its way from its client
  (``request_path.IN_FLIGHT_STEPS`` mean steps, TPOT each; none with one client).

``φ`` is the root of ``φ = (osl − 1)·TPOT(φ) / E2E(φ)``, found by bisection (the right side falls
as φ grows). Requests beyond ``max_running`` wait ``(C − R) / X`` more before their first token.
``replay.replay_closed_loop`` runs the same scheduler step by step;
``tests/serving/test_serving.py`` shows the two agree on the means.

**Fixed lengths (``range_ratio`` 0) are lock-step, not spread.** The form above assumes the
clients' cycles are spread over time (true when lengths are drawn). With fixed lengths they never
spread: every decoding request gains one token per step, so requests whose prompts finished in the
same step finish in the same step, and their clients' next requests arrive together — the start
burst's grouping repeats for ever (the replay shows it; a real ``--random-range-ratio 0`` run
keeps it up to its clients' round-trip jitter, which neither model has). Benchmarks that draw
lengths (InferenceX: ``--random-range-ratio 0.8``) are in the spread regime. The step in flight
at an arrival (``request_path``) is priced in the spread regime only: on the shipped fixed-length
grids (443 rows, priced by the replay) it moves TTFT MAPE from 18.9–19.3 % to 29.5–31.7 % on
Qwen3-32B TensorRT-LLM / vLLM (benchmarks/README_serving.md, r10ttft). At fixed lengths
the spread form under-predicts TTFT 2–3× (Llama-3.1-8B, 1k/256, C=4: 38 ms against the
replay's 94 ms: the four prompts are prefilled together in every cycle). ``_lockstep`` prices
that periodic regime instead: with ``room`` = budget − decoding requests,

* ``isl ≤ room``: requests travel in groups of ``g = ⌊room / isl⌋`` (a request that would
  straddle a step finishes a step later and leaves its group); a group's prompts take one step of
  ``g·isl`` prompt tokens beside the others' decodes (TTFT), and each request's decode window
  holds the prompt steps of every other group (TPOT);
* ``isl > room``: prompts arrive one behind the other and are prefilled back to back in full
  steps of ``room`` tokens; a prompt spans ``1 + (isl − 1) / room`` of them on average.

**A prefill-first engine** (``EngineModel.mixed_prefill`` False: SGLang) keeps the whole wave
together instead: the ``C`` prompts that arrive together are prefilled back to back in steps of
``budget`` prompt tokens while nobody decodes, then all ``C`` decode in lock-step and finish in the
same step (``wave``). A request's first token comes at the end of the step that finishes its
prompt; the rest of the wave's prefill falls between its first and second tokens, so it is in its
TPOT: ``TPOT = decode(C) + (wave − its TTFT) / (osl − 1)``. With drawn lengths a prefill-first
step of the spread regime carries no decode (``_cycle``: its own prompt step decodes nobody).
Checked on the 84 fixed-length SGLang rows of the shipped measurements (H100, Qwen3-32B): TTFT
MAPE 84 % → 18 %, TPOT 56 % → 6 % (``tests/validate/test_validate_serving.py``).

**Batch waiting** (TensorRT-LLM ``batch_wait_timeout_iters``, off by default; an InferenceX
recipe sets it, ``validate.serving_recipes.trtllm_batch_wait``) holds waiting prompts back up to
that many steps: ``batch_wait_steps`` mean steps more TTFT. The start burst does not wait (the
engine waits only while others decode: ``should_check_waiting`` in tensorrt_llm/_torch/pyexecutor)
and the replay does not model it.
**Attention-DP balancing** (TensorRT-LLM ``attention_dp_config.enable_balance``, off by
default; the InferenceX DeepSeek-R1 and gpt-oss recipes set it) holds prompts until every
attention-DP rank has one or a timeout passes: ``adp_balance_steps`` mean decode steps more TTFT.
A receive interval of ``N`` steps (SGLang ``--scheduler-recv-interval``, 1 by default) leaves an
arrival unseen for ``(N − 1) / 2`` decode steps on average beyond the step it missed (it is read at
one of the next ``N`` boundaries, uniformly); likewise not in the burst nor the replay.

**Overlap scheduling** (``EngineModel.overlap_schedule``: SGLang, TensorRT-LLM, vLLM) adds to
TTFT the step an arrival misses (``_admitted``): a mean step (TPOT) while others decode; in a
wave, the decode step of the requests that just finished (the engine sees their finish one step
late). The replay agrees on drawn lengths and on waves; on a mixed engine at fixed lengths its
arrivals that miss a step merge with the next group, which the lock-step form does not model
(the replay's TTFT is then up to 2x this form's).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from plena_opt.serving.admission_waits import adp_balance_steps, batch_wait_steps
from plena_opt.serving.adp_prefill import ranks_prefilling_together
from plena_opt.serving.engines import OVERLAP_ADMISSION_STEPS
from plena_opt.serving.host_overlap import chunk_in_decode_window
from plena_opt.serving.pilot import closed_pilot
from plena_opt.serving.read_batch import read_batch_seconds
from plena_opt.serving.request_path import IN_FLIGHT_STEPS, cycles_spread
from plena_opt.serving.workload import ServingMetrics

if TYPE_CHECKING:
    from plena_opt.serving.steps import StepModel
    from plena_opt.serving.workload import ServingWorkload

BISECTION_STEPS = 40  # φ to 1e-12
SATURATED_U = 0.999  # queue utilisation above which the wait is taken at this value
# ``solve(lo, hi, n, k)``: ``n`` steps of the closed loop's bisection of φ on [lo, hi] (φ rises
# while ``k·TPOT / (TTFT + k·TPOT)`` exceeds it; k = osl − 1), then (TTFT, TPOT) at the last
# interval's midpoint, in one frame (no call per step); ``solve(φ, φ, 0, 0)``: (TTFT, TPOT) at φ
Solver = Callable[[float, float, int, int], tuple[float, float]]


def _cycle(step: StepModel, wl: ServingWorkload, c: int, phi: float) -> tuple[float, float]:
    """(TTFT, TPOT) of one request when every client decodes a share ``phi`` of its cycle."""
    return _cycle_solver(step, wl, c)(phi, phi, 0, 0)


def _cycle_solver(step: StepModel, wl: ServingWorkload, c: int) -> Solver:
    """``_cycle`` with its constants bound once, and the closed loop's bisection run inside
    (``Solver``). The arithmetic is the module docstring's, in the same order; each
    ``min``/``max`` is written as the comparison that picks the same operand, a step is its
    prefill part + decode part + host time (``StepModel.step_seconds``), and a decode part
    between kept counts is read from ``StepModel.decode_lines``."""
    isl, osl, eng = wl.input_len, wl.output_len, step.engine
    budget, host, mixed_prefill = eng.budget_tokens, eng.host_step_seconds, eng.mixed_prefill
    decode, prefill, fisl = step.decode_seconds, step.prefill_seconds, float(isl)
    lines_get, pget = step.decode_lines.get, step.prefill_kept  # kept decode lines, prefill
    cm1 = c - 1  # the other clients
    # steps started before an arrival reached it (spread cycles only: ``request_path``)
    in_flight = IN_FLIGHT_STEPS if cm1 > 0 and cycles_spread(wl) else 0
    # the eager forward's host time inside a prefill figure (``serving.host_overlap``)
    eager = getattr(step.costs, "host_seconds", 0.0)
    in_window, together = chunk_in_decode_window, ranks_prefilling_together
    balanced = eng.adp_ranks > 1 and eng.adp_timeout_iters > 0  # ``serving.adp_prefill``

    def solve(lo: float, hi: float, n: int, k: int) -> tuple[float, float]:
        for i in range(n + 1):
            phi = (lo + hi) / 2
            others = cm1 * phi
            p = others * isl / (osl - 1) if osl > 1 else 0.0
            room = budget - others
            room = room if room > 1.0 else 1.0  # max(1, budget − others)
            chunk = room if room < fisl else fisl  # min(isl, room)
            # attention-DP ranks prefilling a balanced group side by side (``adp_prefill``)
            g = together(eng, c * phi / (osl - 1)) if balanced and osl > 1 else 1.0
            # a group of g prompt chunks is one step; the stream p brings p / (g·chunk) of them
            share = p / (g * chunk)
            share = share if share < 1.0 else 1.0
            x = 1 + others
            lo_n = int(x)  # decode(x) from a kept line
            line = lines_get(lo_n)
            t = decode(x) if line is None else line[0] + (x - lo_n) * line[1]
            if p > 0:  # prefill(max(p, chunk)), a kept count read inline
                x = g * chunk if g * chunk > p else p
                mixed = pget(x)
                if mixed is None:
                    mixed = prefill(x)
                # in the decode window: its host dispatch overlapped (``serving.host_overlap``)
                mixed = in_window(mixed, eager, t, eng)
            else:
                mixed = 0.0
            tpot = t + share * mixed + host
            steps = isl / room  # steps of its prompt (continuous: lengths vary around isl)
            steps = steps if steps > 1.0 else 1.0
            x = chunk + p
            x = x if x < room else room  # min(room, chunk + p)
            own = pget(x)
            if own is None:
                own = prefill(x)
            x = others if mixed_prefill else 0.0
            if x >= 1:
                lo_n = int(x)
                line = lines_get(lo_n)
                t = decode(x) if line is None else line[0] + (x - lo_n) * line[1]
            else:
                t = decode(x)
            own = own + t + host
            u = p / room
            u = u if u < SATURATED_U else SATURATED_U
            ttft = steps * own * (1 + u / (2 * (1 - u))) + in_flight * tpot
            if i == n:
                return ttft, tpot
            a = k * tpot
            if a / (ttft + a) > phi:
                lo = phi
            else:
                hi = phi
        raise AssertionError("unreachable: the loop returns at i == n")

    return solve


def _lockstep(step: StepModel, wl: ServingWorkload, c: int, phi: float) -> tuple[float, float]:
    """(TTFT, TPOT) of fixed-length clients in lock-step groups (module docstring)."""
    return _lockstep_solver(step, wl, c)(phi, phi, 0, 0)


def _lockstep_solver(step: StepModel, wl: ServingWorkload, c: int) -> Solver:
    """``_lockstep`` with its constants bound once, the last grouping's prompt steps kept, and
    the closed loop's bisection run inside (``Solver``); min/max, steps and decode parts read
    as ``_cycle_solver`` reads them. The group size is a non-increasing function of the others
    decoding (``_group_size``, in floating point too: each operation is monotone), so between
    two counts that gave the same size it is that size, not worked out again."""
    isl, osl, eng = wl.input_len, wl.output_len, step.engine
    budget, host, decode = eng.budget_tokens, eng.host_step_seconds, step.decode_seconds
    lines_get, pget, prefill = step.decode_lines.get, step.prefill_kept, step.prefill_seconds
    per_token, cm1 = osl - 1 if osl > 1 else 0, c - 1
    # the last group size, its groups (members − 1, members × groups, prompt step's prefill),
    # the others' prompt time per output token, the least and most others that gave that size
    last_g: int | None = None
    rows: list[tuple[float, int, float]] = []
    tpot_add, o_lo, o_hi = 0.0, math.inf, -math.inf

    def solve(lo: float, hi: float, n: int, k: int) -> tuple[float, float]:
        nonlocal last_g, rows, tpot_add, o_lo, o_hi
        for i in range(n + 1):
            phi = (lo + hi) / 2
            others = cm1 * phi
            if not o_lo <= others <= o_hi:  # else: grouped in ``last_g``s
                room = budget - others
                room = room if room > 1.0 else 1.0  # max(1, ·) inline
                if isl <= room:
                    g = _group_size(isl, c, budget, others, room)
                    if g != last_g:
                        groups, extra = _groups(step, isl, c, g)
                        rows = [(float(m - 1), j * m, pre) for m, j, pre in groups]
                        last_g, tpot_add = g, extra / per_token if per_token else 0.0
                        o_lo = o_hi = others
                    elif others < o_lo:
                        o_lo = others
                    else:
                        o_hi = others
                else:  # prompts back to back in full steps of ``room`` tokens
                    span = 1 + (isl - 1) / room  # full steps a prompt touches
                    full = pget(room)
                    full = prefill(room) if full is None else full
                    ttft = span * (full + decode(others) + host)  # beside the others' decodes
                    x = c * isl / room - span
                    x = (x if x > 0.0 else 0.0) * full  # max(0, ·): the others' prompt time
                    tpot_add = x / per_token if per_token else 0.0
                    last_g, o_lo, o_hi = None, math.inf, -math.inf
            if last_g is not None:
                ttft = 0.0
                for m1, jm, pre in rows:
                    x = others - m1  # the group's own members are not decoding
                    if x >= 1:
                        lo_n = int(x)
                        line = lines_get(lo_n)
                        t = decode(x) if line is None else line[0] + (x - lo_n) * line[1]
                    else:
                        t = decode(x if x > 0.0 else 0.0)
                    ttft += jm * (pre + t + host)  # a step
                ttft = ttft / c
            x = 1 + others
            lo_n = int(x)
            line = lines_get(lo_n)
            t = decode(x) if line is None else line[0] + (x - lo_n) * line[1]
            tpot = t + host + tpot_add
            if i == n:
                return ttft, tpot
            a = k * tpot
            if a / (ttft + a) > phi:
                lo = phi
            else:
                hi = phi
        raise AssertionError("unreachable: the loop returns at i == n")

    return solve


def _group_size(isl: int, c: int, budget: int, others: float, room: float) -> int:
    """Clients per lock-step group with ``others`` decoding and ``room`` = max(1, budget −
    others) ≥ ``isl`` prompt tokens of room: ⌊room / isl⌋ (at most ``c``), grown while the
    group's own members free their decode slots as they prefill."""
    g = math.floor(room / isl)
    g = g if g < c else c  # min(c, ·)
    while g < c and (g + 1) * isl <= budget - (others - g if others > g else 0.0):
        g += 1
    return g


Groups = list[tuple[int, int, float]]  # (members, groups of that size, their prompt step's s)


def _groups(step: StepModel, isl: int, c: int, g: int) -> tuple[Groups, float]:
    """The lock-step groups of ``c`` clients in groups of ``g``: (members, groups of that size,
    their prompt step's prefill seconds) each, and the others' prompt time in a request's decode
    window averaged over the clients (s); kept on ``step`` (they do not depend on φ)."""
    key = ("lockstep", isl, c, g)
    hit = step.memo.get(key)
    if hit is None:
        full, rest = divmod(c, g)
        sizes = [(g, full)] + ([(rest, 1)] if rest else [])
        groups = [(m, n, step.prefill_seconds(m * isl)) for m, n in sizes]
        wave = sum(n * p for _, n, p in groups)  # prompt time per cycle
        extra = 0.0
        for m, n, p in groups:
            extra += n * m * (wave - p)
        hit = step.memo[key] = (groups, extra / c)
    return hit  # type: ignore[return-value]


def wave(step: StepModel, wl: ServingWorkload, c: int, phi: float = 0.0) -> tuple[float, float]:
    """(TTFT, TPOT) in seconds of ``c`` fixed-length clients arriving together on a prefill-first
    engine (module docstring): prompts prefilled back to back in steps of ``budget`` tokens,
    then one decode wave. ``phi`` is unused (the ``_cycle`` signature)."""
    del phi
    isl, osl, eng = wl.input_len, wl.output_len, step.engine
    budget, total = eng.budget_tokens, c * isl
    full = step.prefill_seconds(budget) + eng.host_step_seconds
    steps, rest = divmod(total, budget)
    last = step.prefill_seconds(rest) + eng.host_step_seconds if rest else 0.0
    span = steps * full + last
    # request j (0-based) finishes its prompt in step ⌈(j + 1)·isl / budget⌉ (1-based)
    ends = [math.ceil((j + 1) * isl / budget) for j in range(c)]
    ttft = sum(min(k, steps) * full + (last if k > steps else 0.0) for k in ends) / c
    tail = (span - ttft) / (osl - 1) if osl > 1 else 0.0
    return ttft, step.decode_seconds(c) + eng.host_step_seconds + tail


def _admitted(step: StepModel, at: Callable[[float], tuple], waves: bool, c: int,
              wl: ServingWorkload) -> Callable[[float], tuple[float, float]]:  # fmt: skip
    """``at`` (φ → (TTFT, TPOT)) with the overlap scheduler's admission delay: an arriving
    request misses the step prepared while it arrived (``OVERLAP_ADMISSION_STEPS``), a mean
    step (TPOT) when others decode; in a prefill-first wave (``waves``), the decode step of the
    ``c`` requests that just finished (their finish is seen one step late); TensorRT-LLM's batch
    waiting (``batch_wait_steps``) and SGLang's receive interval (arrivals read every that many
    decode steps, at a uniform point of it, its arrivals prefilled as one batch: ``read_batch``)
    add their waits. ``at`` itself when none applies."""
    eng = step.engine
    adp = eng.adp_timeout_iters > 0 and eng.adp_ranks > 1
    if not (eng.overlap_schedule or eng.batch_wait_iters or eng.recv_interval_steps > 1 or adp):
        return at

    def admitted(phi: float) -> tuple[float, float]:
        ttft, tpot = at(phi)
        if eng.overlap_schedule:
            missed = step.step_seconds(0, c) if waves else tpot
            ttft += OVERLAP_ADMISSION_STEPS * missed
        if eng.batch_wait_iters:
            ttft += batch_wait_steps(eng, wl, c, phi) * tpot
        if eng.recv_interval_steps > 1:
            ttft += (eng.recv_interval_steps - 1) / 2 * step.step_seconds(0, (c - 1) * phi)
            ttft += 0.0 if waves else read_batch_seconds(step, wl, c, phi)
        if adp:
            ttft += adp_balance_steps(eng, wl, c, phi) * step.step_seconds(0, (c - 1) * phi)
        return ttft, tpot

    return admitted


def closed_loop(step: StepModel, wl: ServingWorkload) -> ServingMetrics:
    """Mean TTFT, TPOT, E2E and throughputs of ``wl`` on the engine and plan of ``step``."""
    cap = step.engine.max_running
    c = wl.concurrency if cap is None else min(wl.concurrency, cap)
    osl = wl.output_len
    cycle = _cycle
    if c > 1 and not cycles_spread(wl):  # fixed lengths: lock-step (``request_path``)
        cycle = _lockstep if step.engine.mixed_prefill else wave
    if cycle is wave:  # independent of φ: priced once
        fixed = wave(step, wl, c)
        base: Callable[[float], tuple] = lambda phi: fixed  # noqa: E731
    else:  # constants bound once
        solve = (_cycle_solver if cycle is _cycle else _lockstep_solver)(step, wl, c)
        base = lambda phi: solve(phi, phi, 0, 0)  # noqa: E731
    at = _admitted(step, base, cycle is wave, c, wl)
    # the bisection's [lo, hi], its decisions checked at its ends only (``serving.pilot``)
    lo, hi = closed_pilot(at, osl - 1, BISECTION_STEPS)
    ttft, tpot = at((lo + hi) / 2)
    e2e = ttft + (osl - 1) * tpot
    x = c / e2e
    if wl.concurrency > c:
        ttft += (wl.concurrency - c) / x
        e2e = ttft + (osl - 1) * tpot
    return ServingMetrics.means(
        ttft_seconds=ttft,
        tpot_seconds=tpot,
        e2e_seconds=e2e,
        request_throughput_per_s=x,
        output_tps=x * osl,
        output_tps_per_gpu=x * osl / step.gpus,
        output_tps_per_user=1.0 / tpot if tpot > 0 else 0.0,
        decode_batch=c * (osl - 1) * tpot / (e2e - (wl.concurrency - c) / x),
    )
