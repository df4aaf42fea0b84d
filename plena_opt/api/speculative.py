"""Use case: does speculative decoding pay for a plan under load (``estimate --speculative K``)?

Prices the plan under its serving workload without speculation (``serve_under_load``), then the
same decode batch with ``K`` drafts and a verify step per step (``plena_opt.serving.speculative``):
the two mean TPOTs and the verdict. Only what serving under load prices (GPU chips, TP/EP engine
instances and their DP replicas; pipeline and context parallelism are refused there by name).
Times in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from plena_opt.serving.speculative import speculation

__all__ = ["SpeculativeVerdict", "speculate", "speculation"]

if TYPE_CHECKING:
    from plena_opt.api.under_load import UnderLoad
    from plena_opt.estimate.plan import Plan
    from plena_opt.estimate.problem import EvaluatorInputs
    from plena_opt.serving.speculative import Speculation


@dataclass(frozen=True)
class SpeculativeVerdict:
    """The setting, E (tokens per step), both mean TPOTs (s), the steps behind them (s, host
    excluded) at ``decode_batch`` requests decoding, and whether speculation lowers TPOT."""

    spec: Speculation
    decode_batch: float
    decode_step_seconds: float
    verify_step_seconds: float
    draft_seconds: float
    tpot_without: float
    tpot_with: float

    @property
    def pays(self) -> bool:
        return self.tpot_with < self.tpot_without

    def to_dict(self) -> dict[str, Any]:
        """The ``speculative`` document of ``estimate --json`` (SI)."""
        s = self.spec
        return {
            "method": s.method,
            "k": s.k,
            "acceptance": list(s.acceptance),
            "acceptance_source": s.source,
            "expected_tokens_per_step": s.expected_tokens_per_step,
            "decode_batch": self.decode_batch,
            "decode_step_seconds": self.decode_step_seconds,
            "verify_step_seconds": self.verify_step_seconds,
            "draft_seconds": self.draft_seconds,
            "tpot_without": self.tpot_without,
            "tpot_with": self.tpot_with,
            "pays": self.pays,
        }

    def to_text(self) -> str:
        """One line: the two TPOTs and the verdict (ms)."""
        s = self.spec
        rates = "/".join(f"{a:g}" for a in s.acceptance)
        verdict = "pays" if self.pays else "does not pay"
        return (
            f"Speculative decoding {s.method} K={s.k} (acceptance {rates}, {s.source}; "
            f"E={s.expected_tokens_per_step:.2f} tokens/step): TPOT "
            f"{1e3 * self.tpot_without:.2f} ms without, {1e3 * self.tpot_with:.2f} ms with: "
            f"{verdict} (decode batch {self.decode_batch:.1f}: decode step "
            f"{1e3 * self.decode_step_seconds:.2f} ms, verify {1e3 * self.verify_step_seconds:.2f}"
            f" ms + drafts {1e3 * self.draft_seconds:.2f} ms)"
        )


def speculate(
    problem: EvaluatorInputs, plan: Plan, load: UnderLoad, spec: Speculation, engine: str = "vllm"
) -> SpeculativeVerdict:
    """``spec`` on ``plan`` under the workload ``load`` was priced with (``serve_under_load`` of
    the same problem, plan and engine): both TPOTs at its steady-state decode batch."""
    from plena_opt.estimate.gpu_queue import EvaluatorStepCosts
    from plena_opt.serving import StepModel, engine_model
    from plena_opt.serving.calibration import calibrated
    from plena_opt.serving.speculative import VerifyStepModel
    from plena_opt.serving.steps import engine_workload

    if plan.pp > 1:  # its verify step is not a turn of the pipeline (serving.pipeline)
        from plena_opt.errors import PlenaInputError

        raise PlenaInputError(
            "speculative",
            f"--speculative {spec.k}: speculative decoding on a pipeline-parallel plan "
            f"(--pp {plan.pp}) is not modelled under load",
        )
    if plan.dp > 1:  # one replica, as serve_under_load prices it
        from plena_opt.estimate.disaggregated import sub_noc

        plan = replace(plan, dp=1)
        problem = replace(problem, noc=sub_noc(problem.noc, plan.world_size))  # type: ignore[arg-type]
    wl = problem.workload
    hbm = float(problem.chip.hbm.capacity_bytes.value)  # type: ignore[union-attr]
    eng = calibrated(engine_model(engine, hbm), problem.chip.name)  # type: ignore[union-attr]
    args = (problem.model, problem.noc, problem.memory, problem.chip)
    wl = engine_workload(wl, eng)
    plain = StepModel.from_problem(*args, wl, plan, eng, range_ratio=load.range_ratio)
    k1 = spec.k + 1
    scaled = replace(
        wl,
        input_seq_len=max(1, round(wl.input_seq_len / k1)),
        output_seq_len=max(1, round(wl.output_seq_len / k1)),
    )
    costs = EvaluatorStepCosts(*args, scaled, plan)  # type: ignore[arg-type]
    model = VerifyStepModel(spec, costs, plain, problem.model.num_layers)
    n = _decode_batch(load)
    tpot = load.steady.tpot_seconds
    return SpeculativeVerdict(
        spec,
        n,
        plain.decode_seconds(n),
        model.verify_seconds(n),
        model.draft_seconds(n),
        tpot,
        model.tpot(tpot, n),
    )


def _decode_batch(load: UnderLoad) -> float:
    """Requests decoding in the step one request sees: 1 + the others' share (closed loop, as
    ``serving.steady`` prices TPOT), the mean running decodes (Poisson)."""
    db = load.steady.decode_batch
    if load.concurrency is None:
        return db
    c = load.concurrency if load.max_running is None else min(load.concurrency, load.max_running)
    return 1 + (c - 1) * db / c if c > 0 else db


def speculation_of_load(msg: Any) -> Speculation | None:
    """The setting of a ``ServingLoad`` message (``speculative`` 0: none); bad values raise
    naming ``speculative``, ``speculative_method`` or ``acceptance``."""
    if msg.speculative == 0 and not msg.speculative_method and not msg.acceptance:
        return None
    if msg.speculative == 0:
        from plena_opt.errors import PlenaInputError

        raise PlenaInputError("speculative", "speculative_method/acceptance need speculative K")
    rates = tuple(msg.acceptance) if msg.acceptance else None
    return speculation(msg.speculative_method or "eagle", int(msg.speculative), rates)


_SECONDS = ("decode_step_seconds", "verify_step_seconds", "draft_seconds")


def verdict_to_proto(v: SpeculativeVerdict) -> Any:
    """The typed ``SpeculativeVerdict`` message (seconds)."""
    from plena_proto import plena_opt_pb2 as pb

    s = v.spec
    return pb.SpeculativeVerdict(
        method=s.method,
        k=s.k,
        acceptance=list(s.acceptance),
        acceptance_source=s.source,
        expected_tokens_per_step=s.expected_tokens_per_step,
        decode_batch=v.decode_batch,
        tpot_without_seconds=v.tpot_without,
        tpot_with_seconds=v.tpot_with,
        pays=v.pays,
        **{f: getattr(v, f) for f in _SECONDS},
    )


def verdict_from_proto(msg: Any) -> SpeculativeVerdict:
    """The verdict a ``SpeculativeVerdict`` message carries (the remote CLI prints it)."""
    from plena_opt.serving.speculative import Speculation

    spec = Speculation(msg.method, msg.k, tuple(msg.acceptance), msg.acceptance_source)
    return SpeculativeVerdict(
        spec,
        msg.decode_batch,
        *(getattr(msg, f) for f in _SECONDS),
        msg.tpot_without_seconds,
        msg.tpot_with_seconds,
    )
