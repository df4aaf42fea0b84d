"""Front-only storage of a worker's chunk (issue 17, ``--store-plans front``).

With ``--store-plans all`` a worker writes one Optuna trial per scored plan; that write, not the
evaluator, was a worker's cost (≈ 40 ms of client CPU per 64 plans, under the study-row lock:
benchmarks/README_workers.md). With ``front`` a finished chunk stores, in **one transaction**:

* as plan trials of the study (``plena_opt.search.storage.trials.record_trial``, the same trials as
  ``all`` writes) only the chunk's *fronts*: its feasible Pareto front (COMPLETE), the Pareto
  front of its infeasible plans by objective values (PRUNED) and its least-violating plan (the
  one ``best_infeasible`` reports when nothing is feasible). The study's feasible front is a
  subset of the union of the chunks' fronts (a plan dominated within its chunk is dominated in
  the study), so the study's best trials (the CLI's front, optuna-dashboard's) are the same as
  with ``all``;
* every plan's metrics, compactly, on the chunk's trial in the queue study (``RECORDS_ATTR``:
  zlib-compressed JSON, base64 text, ≤ ``MAX_CHUNK_PLANS`` plans), so ``--csv-all``, resume,
  the re-check and ``trials_completed`` read every plan;
* the chunk's state COMPLETE (its value: plans recorded). A worker killed before the commit
  leaves nothing of the chunk; the retry scores it whole, so each plan is recorded exactly once.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from plena_opt.search.fronts.pareto import pareto_mask
from plena_opt.search.record import Record
from plena_opt.search.space.space import Point
from plena_opt.search.storage.rdb_bulk import _rdb, add_finished_trials, insert_rows, prepare_rows

QUEUE_SUFFIX = ":work"  # the queue study of study S is S + QUEUE_SUFFIX
STORE_ATTR = "plena:store_plans"  # on the queue study: "all" or "front"
RECORDS_ATTR = "plena:records"  # on a COMPLETE chunk trial: every plan's metrics (see above)
STORE_MODES = ("all", "front")
# Bound of a chunk in ``front`` mode: its records attribute stays below ≈ 0.5 MiB (a plan's
# metrics are ≈ 800 bytes of JSON, ≈ 105 as stored: measured on 256 llama-3.1-70b plans on 32
# H200s; PostgreSQL's TEXT holds 1 GB).
MAX_CHUNK_PLANS = 4096


def encode_records(recs: Sequence[Record]) -> str:
    """Plans and metric summaries of ``recs`` as compact text (zlib JSON, base64)."""
    rows = [[r.point.to_dict(), r.summary] for r in recs]
    raw = json.dumps(rows, separators=(",", ":")).encode()
    return base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def decode_records(text: str) -> list[tuple[Point, dict[str, Any]]]:
    """``encode_records``' (point, metric summary) pairs."""
    rows = json.loads(zlib.decompress(base64.b64decode(text)))
    return [(Point.from_dict(p), m) for p, m in rows]


def _front(recs: Sequence[Record], signs: np.ndarray) -> list[Record]:
    if not recs:
        return []
    mask = pareto_mask(np.array([r.values for r in recs]) * signs)
    return [r for r, keep in zip(recs, mask, strict=True) if keep]


def chunk_fronts(recs: Sequence[Record], signs: Sequence[float]) -> list[Record]:
    """The plans of a chunk stored as trials: feasible front, infeasible front (by objective
    values), least-violating plan; ``signs`` +1 minimise, −1 maximise per objective."""
    sg = np.asarray(signs, dtype=float)
    keep = _front([r for r in recs if r.feasible], sg)
    infeasible = [r for r in recs if r.valid and not r.feasible]
    keep += _front(infeasible, sg)
    if infeasible:
        worst = min(infeasible, key=lambda r: sum(max(v, 0.0) for v in r.constraints.values()))
        if all(worst is not r for r in keep):
            keep.append(worst)
    return keep


def complete_chunk(
    study: optuna.Study,
    queue: optuna.Study,
    chunk_id: int,
    trials: Sequence[FrozenTrial],
    records: str,
    n: int,
) -> bool:
    """Store ``trials`` in ``study``, ``records`` on chunk ``chunk_id`` of ``queue`` and mark it
    COMPLETE with value ``n``: one transaction on an RDB store. False (nothing stored) when the
    chunk is finished already (another worker failed it as stale)."""
    rdb = _rdb(queue)
    if rdb is None:  # Optuna's gRPC proxy: in three calls; a retry overwrites the records
        add_finished_trials(study, trials)
        queue._storage.set_trial_user_attr(chunk_id, RECORDS_ATTR, records)
        try:
            return queue._storage.set_trial_state_values(chunk_id, TrialState.COMPLETE, [n])
        except optuna.exceptions.UpdateFinishedTrialError:
            return False
    from optuna.storages._rdb import models
    from optuna.storages._rdb.storage import _create_scoped_session

    prepared = prepare_rows(trials)
    value, kind = models.TrialValueModel.value_to_stored_repr(float(n))
    with _create_scoped_session(rdb.scoped_session) as session:
        chunk = models.TrialModel.find_or_raise_by_id(chunk_id, session, for_update=True)
        if chunk.state != TrialState.RUNNING:
            return False
        insert_rows(session, study._study_id, prepared)
        session.add(
            models.TrialUserAttributeModel(
                trial_id=chunk_id, key=RECORDS_ATTR, value_json=json.dumps(records)
            )
        )
        session.add(
            models.TrialValueModel(trial_id=chunk_id, objective=0, value=value, value_type=kind)
        )
        chunk.state = TrialState.COMPLETE
        chunk.datetime_complete = datetime.now()
    return True


def _queue_of(study: optuna.Study) -> optuna.Study | None:
    name = study.study_name + QUEUE_SUFFIX
    if name not in optuna.get_all_study_names(study._storage):
        return None
    return optuna.load_study(study_name=name, storage=study._storage)


def chunk_records(study: optuna.Study) -> Iterator[tuple[Point, dict[str, Any]]]:
    """Every (point, metric summary) recorded on the COMPLETE chunks of ``study``'s queue (none
    without a queue or in ``all`` mode); each plan once."""
    queue = _queue_of(study)
    if queue is None or queue.user_attrs.get(STORE_ATTR) != "front":
        return
    seen: set[str] = set()
    for t in queue.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        text = t.user_attrs.get(RECORDS_ATTR)
        for point, summary in decode_records(text) if text else ():
            if point.key not in seen:
                seen.add(point.key)
                yield point, summary


def chunk_keys(study: optuna.Study) -> set[str]:
    """Keys of the plans recorded on ``study``'s chunks (``chunk_records``)."""
    return {p.key for p, _ in chunk_records(study)}
