"""What a closed-loop client's next request waits before the engine's scheduler sees it.

A client sends its next request when its last one's final token reaches it: the engine had
finished that request at the end of a step and, with other requests running, started the next
step at once (vLLM's ``EngineCore.run_busy_loop`` reads its input queue only between steps;
SGLang's and TensorRT-LLM's overlap loops read it once per iteration, before scheduling). The
new request crosses the client, the HTTP server and the tokeniser, and reaches the engine after
that step has begun, so it joins the scheduler one step later than a request present at the
step boundary: ``IN_FLIGHT_STEPS`` whole steps (the step in flight is a mean step; its start
and the client's send are both the previous step's end, up to the output path's few ms on each
side, which cancel). With nobody else running the engine is idle and waits for the request:
no step is missed; in a closed loop of ``C ≥ 2`` clients with drawn lengths another request is
always in the engine (waiting, prefilling or decoding), so every follow-up misses one. A count
read from the engines' loops, not fitted. Not applied at fixed lengths (``steady`` docstring).

``cycles_spread`` is the one rule for the spread regime, read by the steady states, both replays
and the API: the step in flight here and the prompt host time hidden in a decode window
(``serving.host_overlap``) are priced where it holds, and nowhere else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plena_opt.serving.open_loop import OpenLoopWorkload
    from plena_opt.serving.workload import ServingWorkload

# Steps a closed-loop arrival misses because the engine started a step while the request was on
# its way (the client's turnaround, HTTP frontend and tokenisation take longer than the
# scheduler's turnaround between steps): the step in flight. vLLM v1 engine/core.py
# ``EngineCoreProc.run_busy_loop``: ``_process_input_queue`` (blocks only with no work) then
# ``_process_engine_step``; SGLang managers/scheduler.py ``event_loop_overlap``: ``recv_requests``
# once per batch; TensorRT-LLM _torch/pyexecutor/py_executor.py ``_executor_loop_overlap``:
# ``_fetch_new_requests`` (1.0) / ``_prepare_and_schedule_batch`` (1.2) once per iteration.
# Checked on the shipped measurements (benchmarks/README_serving.md, r10ttft): the c <= 8
# B200 rows' TTFT gap was 1.3-1.5 TPOT with a -3 ms constant before it.
IN_FLIGHT_STEPS = 1


def cycles_spread(wl: ServingWorkload | OpenLoopWorkload) -> bool:
    """Whether the requests' cycles are spread over time: Poisson arrivals (an open loop), or a
    closed loop with drawn lengths (``range_ratio`` > 0). A fixed-length closed loop stays in its
    start burst's lock-step (``steady`` docstring): its steps stay additive (no host overlap,
    ``serving.host_overlap``) and no arrival misses a step in flight."""
    return wl.range_ratio > 0 or hasattr(wl, "request_rate_per_s")  # an ``OpenLoopWorkload``
