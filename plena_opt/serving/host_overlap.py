"""A prompt chunk in the decode window of the requests it interrupts: host dispatch overlapped.

The evaluator prices a prefill pass as its kernels plus the host time of an eager forward
(``EvaluatorStepCosts.prefill_seconds``: ``estimate.gpu_host``, the per-op dispatch cost fitted on
fig09's eager rows): the *latency* of a prompt on an idle GPU, where the device waits for each
launch. Under load a step that carries prompt tokens follows other steps, and kernel launches are
asynchronous: the device runs kernels while the host is still dispatching the rest, so the step
lasts the longer of the two, not their sum; with an overlap scheduler (SGLang, TensorRT-LLM and,
from 0.14.0, vLLM by default: ``EngineModel.overlap_schedule``) the host prepares and
dispatches a step while the device still runs the previous one, which hides one more step.

So, for the TPOT of the requests that decode around a prompt chunk (``steady``'s spread form),
the chunk adds ``max(K, H − D·s)`` to their step instead of ``K + H``: ``K`` the chunk's kernels,
``H`` the eager forward's host time, ``D`` the decode step they would have run anyway and ``s``
the device steps the host's dispatch can hide behind — the step's own decode kernels when the
chunk is mixed into it (``EngineModel.mixed_prefill``), plus the previous step under overlap
scheduling. ``max(K, H − D·s) ≤ K + H`` always (no step priced slower than before), and it is
``K`` whenever the device has more work than the host dispatches. With ``s = 0`` (a prefill-first
engine without overlap scheduling: the chunk runs alone, nobody's device work in flight) the
chunk keeps its whole latency ``K + H``, as an isolated prompt step does on the TTFT side.

Nothing is fitted: ``K``, ``H`` and ``D`` are the evaluator's own figures. The TTFT side keeps the
idle-GPU latency (its own prompt step, ``own`` in ``steady``; in the replays a step's prompts get
their first token after the whole step, ``StepModel.window_seconds``). It is priced where the
requests' cycles are spread (``request_path.cycles_spread``: drawn lengths or Poisson arrivals),
in the steady states and both replays alike; fixed-length closed loops (``steady``'s lock-step
form, ``benchmark.fixed_length_run``, the API's replay) keep additive steps: the shipped
fixed-length rows do not show the overlap (benchmarks/README_serving.md, r10tpot).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plena_opt.serving.engines import EngineModel


def hidden_steps(engine: EngineModel) -> int:
    """Device steps a prompt chunk's eager dispatch overlaps: its own step's decode kernels when
    the engine mixes prompt chunks into decode steps, plus the step before it under overlap
    scheduling (0, 1 or 2)."""
    return int(engine.mixed_prefill) + int(engine.overlap_schedule)


def chunk_in_decode_window(prefill_s: float, host_s: float, decode_s: float,
                           engine: EngineModel) -> float:  # fmt: skip
    """Seconds a prompt chunk adds to the decode steps around it (module docstring):
    ``max(K, H − D·s)`` with ``K = prefill_s − host_s`` the chunk's kernels, ``H = host_s`` the
    eager host time inside ``prefill_s``, ``D = decode_s`` the decode step, ``s = hidden_steps``."""
    kernels, steps = prefill_s - host_s, hidden_steps(engine)
    if kernels < 0.0 or steps == 0:  # no host part in the figure; or nothing else in flight
        return prefill_s
    exposed = host_s - decode_s * steps
    return kernels if kernels > exposed else exposed


def decoders_hiding(engine: EngineModel, decoding: int, before: int, spread: bool) -> int:
    """Requests whose decode step a prompt chunk's eager dispatch overlaps, as both replays count
    them: the step's own ``decoding`` requests when the engine mixes chunks into decode steps;
    on a prefill-first engine (its prompt step decodes nobody) the ``before`` requests the
    previous step decoded, which overlap scheduling runs while the host dispatches the chunk
    (without it ``hidden_steps`` is 0: nothing hidden); none unless the cycles are ``spread``
    (``request_path.cycles_spread``)."""
    if not spread:
        return 0
    return decoding if engine.mixed_prefill else before
