"""Disaggregated deployments searched by an Optuna study (``--serving-sampler optuna``).

Each trial picks a deployment: the format (``precision``, when several are searched), the
prefill pool size (``prefill_devices``) and one worker of that size (``prefill_worker_n<size>``,
an index into the priced workers of that size and format, ``…_<format>_n<size>`` with several
formats: conditional parameters, one name per choice list), and the same for the decode pool;
the worker counts ``x``, ``y`` are rate-matched (``rate_match``), not searched: for a pair the
rate-matched counts are the best per device. Objectives: the comparison's, minimised
(``Points.minimised``); the SLA is the constraint (``ConstraintAdapter``: 1 when missed, 0 when
met).
A deployment suggested again is told its stored values and scored once.

The study lives in memory; every scored deployment is returned with its sampler params
(``sampler_params``) so that ``serving_store`` writes it once into ``<study>-serving`` with the
plan params the dashboard shows and a later run resumes from it (``seed_trials``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from plena_opt.estimate.disaggregated import WorkerFigures
from plena_opt.search.serving.serving_points import Points, concat

OPTUNA_SAMPLERS = ("nsga2", "tpe")


@dataclass
class PairChoices:
    """The workers each trial chooses from: by format, then by pool size."""

    by_format: dict[str | None, dict[int, list[WorkerFigures]]]

    @classmethod
    def of(cls, workers: Sequence[WorkerFigures]) -> PairChoices:
        out: dict[str | None, dict[int, list[WorkerFigures]]] = {}
        for w in workers:
            out.setdefault(w.precision, {}).setdefault(w.devices, []).append(w)
        return cls(out)

    def param(self, role: str, prec: str | None, size: int) -> str:
        tail = f"_{prec}_n{size}" if len(self.by_format) > 1 else f"_n{size}"
        return f"{role}_worker{tail}"

    def pick(self, trial: Any) -> tuple[WorkerFigures, WorkerFigures, dict[str, Any]]:
        """The (prefill, decode) workers ``trial`` suggests and its params."""
        formats = list(self.by_format)
        prec = formats[0]
        if len(formats) > 1:
            prec = trial.suggest_categorical("precision", formats)
        sizes = sorted(self.by_format[prec])
        chosen = []
        for role in ("prefill", "decode"):
            size = trial.suggest_categorical(f"{role}_devices", sizes)
            ws = self.by_format[prec][size]
            chosen.append(ws[trial.suggest_int(self.param(role, prec, size), 0, len(ws) - 1)])
        return chosen[0], chosen[1], dict(trial.params)


@dataclass
class OptunaPairs:
    """Scored deployments of the Optuna pair search (resumed ones first), their sampler params
    and which of them this run scored (``new``: to be stored)."""

    points: Points
    params: list[dict[str, Any]] = field(default_factory=list)
    new: list[bool] = field(default_factory=list)
    suggested: int = 0  # trials asked this run (a repeat is told its stored values)


def _sampler(name: str, seed: int | None, kwargs: dict[str, Any]) -> Any:
    import optuna

    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, **kwargs)
    return optuna.samplers.NSGAIISampler(seed=seed, **kwargs)


def search_pairs(
    choices: PairChoices,
    score: Any,
    objectives: Sequence[str],
    budget: int,
    seed: int | None = 0,
    sampler: str = "nsga2",
    seeds: Sequence[dict[str, Any]] = (),
    stop: Any = None,
) -> OptunaPairs:
    """Run the study until it holds ``budget`` distinct deployments in all, resumed ones included
    (or 4 × ``budget`` trials this run, or ``stop``): a re-run with the same budget scores no new
    deployment, a larger one scores the difference. ``score(p, d) -> Points`` scores one pair;
    ``seeds`` are the sampler params of deployments scored before (a resumed study): enqueued first
    and told to the sampler, their figures recombined from the priced workers (``pair_points``, no
    plan evaluation), not stored again."""
    import optuna

    from plena_opt.search.space.constraint_adapter import ConstraintAdapter

    if not choices.by_format:  # no worker fits: nothing to search
        return OptunaPairs(concat([]))

    adapter = ConstraintAdapter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study = optuna.create_study(
            directions=["minimize"] * len(objectives),
            sampler=_sampler(sampler, seed, adapter.sampler_kwargs()),
        )
    seen: dict[tuple, tuple[list[float], float]] = {}
    out = OptunaPairs(concat([]))
    parts: list[Points] = []

    def run(new: bool) -> None:
        trial = study.ask()
        p, d, prm = choices.pick(trial)
        key = tuple(sorted(prm.items()))
        if key not in seen:
            pts = score(p, d)
            values = [float(v) for v in pts.minimised(objectives)[0]]
            seen[key] = (values, 0.0 if bool(pts.feasible[0]) else 1.0)
            parts.append(pts)
            out.params.append(prm)
            out.new.append(new)
        values, violation = seen[key]
        adapter.record(trial, {"sla": violation})
        study.tell(trial, values)

    for prm in seeds:
        if _valid(choices, prm):
            study.enqueue_trial(prm)
            run(False)
    left = max(0, budget - len(seen))  # new deployments this run may score
    while sum(out.new) < left and out.suggested < 4 * budget:
        if stop is not None and stop.is_set():
            break
        out.suggested += 1
        run(True)
    out.points = concat(parts)
    return out


def _valid(choices: PairChoices, prm: dict[str, Any]) -> bool:
    """Whether stored sampler params still name workers of this space."""
    prec = prm.get("precision", next(iter(choices.by_format)))
    sizes = choices.by_format.get(prec)
    if sizes is None:
        return False
    for role in ("prefill", "decode"):
        size = prm.get(f"{role}_devices")
        idx = prm.get(choices.param(role, prec, size))
        if size not in sizes or not isinstance(idx, int) or not 0 <= idx < len(sizes[size]):
            return False
    return True


def optuna_points(
    space: Any,
    ws: list[WorkerFigures],
    objectives: Sequence[str],
    pair_points: Callable[..., Points],
) -> Points:
    """The deployments the study picks from the workers ``ws`` of ``space`` (a
    ``ServingSpace``: its budget, seed, sampler, resume params and stop token); all of them
    are kept (``space.optuna``), ``evaluated`` counts those this run scored. ``pair_points``
    scores (prefill, decode) worker pairs (``search.serving.disaggregated.pair_points``, passed in
    by its caller so that this module does not import it back)."""
    noc, n = space.inputs.noc, space.inputs.noc.num_devices
    out = space.inputs.workload.output_seq_len

    def score(p: WorkerFigures, d: WorkerFigures) -> Points:
        return pair_points(noc, [p], [d], out, n, space.sla)

    space.optuna = search_pairs(
        PairChoices.of(ws), score, objectives, space.budget, space.seed,
        space.optuna_sampler, space.resume, space.stop,
    )  # fmt: skip
    space.stopped()  # keeps the token's reason when it stopped the study
    pts = space.optuna.points
    pts.evaluated = sum(space.optuna.new)
    return pts
