"""The prompts an SGLang receive interval hands the scheduler at once: one prefill batch.

With ``--scheduler-recv-interval N`` (``EngineModel.recv_interval_steps``) SGLang reads its input
queue once every ``N`` decode steps (managers/scheduler_recv_skipper.py: a decode forward adds 1
to a counter, a prefill forward 1000; the queue is read when the count reaches ``N``). Every
request that arrived since the last read is read together, and SGLang's prefill-first scheduler
(``enable_mixed_chunk`` False; ``Scheduler.get_new_batch_prefill`` fills one prefill batch from
the waiting queue up to ``chunked_prefill_size`` / ``max_prefill_tokens`` tokens,
managers/schedule_policy.py ``PrefillAdder``) runs them as one forward: each request's first token
comes at the end of that forward, which carries the prompts of all the arrivals of the last ``N``
steps, not of one step. ``steady`` prices a request's prompt step with one step's arrival stream
``p`` beside it (``_cycle_solver``: ``chunk + p`` tokens) and the wait for the read
(``(N − 1) / 2`` steps, ``_admitted``); the batch a read delivers holds ``N·p`` other prompt
tokens on average (arrivals in a window of ``N`` steps), so its prefill costs
``prefill(isl + N·p)`` where the step form priced ``prefill(isl + p)``. A batch over the step's
token budget is prefilled in full steps of the budget, first come first served: a request waits
for the ones ahead of it in its batch, ``N·p / 2`` tokens on average. The queue factor of the
step form is not applied to the difference (the load per step is the same). Nothing fitted:
``N`` is the recipe's flag (``validate.serving_recipes.sglang_recv_interval``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plena_opt.serving.steps import StepModel
    from plena_opt.serving.workload import ServingWorkload


def read_batch_seconds(step: StepModel, wl: ServingWorkload, c: int, phi: float) -> float:
    """TTFT (s) a request gains because its receive interval's read brings ``N`` steps of
    arrivals into its prefill batch (module docstring); 0 at ``N`` = 1, one client or no output."""
    eng, isl, osl = step.engine, float(wl.input_len), wl.output_len
    n = eng.recv_interval_steps
    others = (c - 1) * phi
    if n <= 1 or others <= 0 or osl <= 1:
        return 0.0
    p = others * isl / (osl - 1)  # prompt tokens arriving per step (``steady._cycle_solver``)
    room = max(1.0, eng.budget_tokens - others)
    chunk = min(isl, room)
    steps = max(1.0, isl / room)
    base = steps * step.prefill_seconds(min(room, chunk + p))  # the step form's prompt step
    batch = isl + n * p
    if batch <= room:
        priced = step.prefill_seconds(batch)
    else:  # full steps of the budget up to its own last chunk
        priced = max(1.0, (isl + n * p / 2) / room) * step.prefill_seconds(room)
    return max(0.0, priced - base)
