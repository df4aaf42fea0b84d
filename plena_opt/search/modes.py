"""How a search spends its budget: resolve ``auto``, score every plan (exhaustive), or run a
sampler (``plena_opt.search.sampled``); and score the rest of the space for the exact front."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from plena_opt.search.record import Record
from plena_opt.search.space import Point

if TYPE_CHECKING:
    from plena_opt.search.session import _Search

EXHAUSTIVE_CHUNK = 128
# Scored plans are written once this many are waiting or this much time passed (s): one journal
# append and fsync per write; a crash redoes at most that much scoring on resume.
WRITE_POINTS, WRITE_SECONDS = 1024, 0.5
# TPE's own cost per budgeted trial (s), beyond scoring its plan: suggestions (including the
# repeated and illegal ones a new plan takes) and telling them. Measured 2026-12-01 on the 2-core
# box (load 1), multivariate TPE, in-memory sampler study, 2,048-point space (4 batch sizes,
# 1,024 devices, tests' fake evaluator): 300 new plans in 512 asks, 2.53 s → 8.4 ms per trial.
# ``auto`` prices the sampler's budget with it against scoring every remaining plan.
TPE_SECONDS_PER_TRIAL = 0.0084


def choose_sampler(s: _Search, todo: list[Point]) -> tuple[str, list[Record]]:
    """Resolve ``auto``: exhaustive whenever scoring every remaining plan costs less than
    the sampler's budget (``trials`` trials of TPE, each its plan's score plus the sampler's
    own ``TPE_SECONDS_PER_TRIAL``), else TPE. The probe's points count as scored."""
    name = s.req.sampler
    if name != "auto":
        return name, []
    if len(todo) <= s.req.trials:
        return "exhaustive", []
    first = todo[0]
    probe = [p for p in todo if (p.batch_size, p.precision) == (first.batch_size, first.precision)][
        :16
    ]
    t = time.perf_counter()
    recs = s.score(probe)
    per_point = (time.perf_counter() - t) / max(len(probe), 1)
    exhaustive_s = per_point * (len(todo) - len(probe))
    sampler_s = (s.req.trials - len(probe)) * (per_point + TPE_SECONDS_PER_TRIAL)
    return ("exhaustive" if exhaustive_s <= sampler_s else "tpe"), recs


def run_exhaustive(s: _Search, todo: list[Point], scored: list[Record]) -> None:
    """Score every plan of ``todo`` in chunks (after the ``scored`` probe), storing batches as
    they fill; stops between chunks when ``s.check_stop()`` says so."""
    if scored:
        s.add_records(scored)
    total, done = len(todo), len(scored)
    pending: list[Record] = []
    last = time.perf_counter()
    try:
        _exhaustive_loop(s, todo, pending, done, total, last)
    finally:
        s.add_records(pending)  # scored plans are stored even when stopped


def _exhaustive_loop(
    s: _Search, todo: list[Point], pending: list[Record], done: int, total: int, last: float
) -> None:
    for batch, prec in s.groups():
        group = [p for p in todo if p.batch_size == batch and p.precision == prec]
        for i in range(0, len(group), EXHAUSTIVE_CHUNK):
            s.stop_reason = s.check_stop()
            if s.stop_reason:
                return
            chunk = [p for p in group[i : i + EXHAUSTIVE_CHUNK] if p.key not in s.cache]
            pending.extend(s.score(chunk))
            done += len(chunk)
            if len(pending) >= WRITE_POINTS or time.perf_counter() - last > WRITE_SECONDS:
                s.add_records(pending)
                pending.clear()
                last = time.perf_counter()
            s.report("exhaustive", done, total)


def run_sampled(s: _Search, sampler_name: str, scored: list[Record]) -> None:
    """Run the sampler ``sampler_name`` over the search (``plena_opt.search.sampled``)."""
    from plena_opt.search.sampled import SampledRun

    if scored:  # probe points of ``auto``: already scored, keep them
        s.add_records(scored)
    SampledRun(s, sampler_name).run()


def exact_records(s: _Search) -> list[Record]:
    """Every legal point scored (cache first); not stored in the study."""
    out = [s.cache[p.key] for p in s.space.points if p.key in s.cache]
    for batch, prec in s.groups():
        todo = [
            p
            for p in s.space.points
            if p.batch_size == batch and p.precision == prec and p.key not in s.cache
        ]
        for i in range(0, len(todo), EXHAUSTIVE_CHUNK):
            out.extend(s.score(todo[i : i + EXHAUSTIVE_CHUNK]))
    return out
