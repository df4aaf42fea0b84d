"""TTFT under concurrency on a GPU: a burst of requests through vLLM's chunked-prefill scheduler.

A static-batch estimate prefills every sequence in one pass, so all of them get their first
token at once. A server does not: vLLM (V1 engine, chunked prefill on) runs one step at a time
under a token budget ``max_num_batched_tokens``; each step first gives one token to every request
already decoding, then fills what is left with prompt tokens of the waiting requests in arrival
order (a prompt longer than the rest of the budget is split over steps). A request's first
token is sampled in the step that finishes its prompt. ``burst_ttft`` replays that scheduler
for ``batch`` requests arriving together (the closed-loop benchmarks of fig09), with step times
from the evaluator (``EvaluatorStepCosts``): the prefill pass of the step's prompt tokens plus
the decode step of the requests already decoding (both passes read the weights; counting that
twice overstates a mixed step by at most one decode step's weight read).

``VLLM_MAX_NUM_BATCHED_TOKENS`` is vLLM's default budget for its OpenAI server on a GPU with at
least 70 GiB (``vllm/engine/arg_utils.py``, ``default_max_num_batched_tokens``: 8192; 16384 for
the offline ``LLM`` class; 2048 on smaller GPUs) before 0.28.0, which runs 16384 on GPUs of
>= 160 GiB (``serving.vllm_budget``; the fig09 B200 runs ran 8192: ``validate.scorecard``).
Nothing here is fitted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from plena_opt.errors import PlenaInputError

if TYPE_CHECKING:
    from plena_opt.chip.gpu import GpuChipProfile
    from plena_opt.estimate.decode_floor import DecodeFloor
    from plena_opt.estimate.distributed import PlanCost
    from plena_opt.estimate.evaluator import Evaluator
    from plena_opt.estimate.plan import Plan, Workload
    from plena_opt.memory import Memory
    from plena_opt.models import ModelSpec

VLLM_MAX_NUM_BATCHED_TOKENS = 8192
MAX_BURST = 1 << 16  # requests one replay accepts (bounds the loop)
MAX_OUTPUT = 1 << 17  # output tokens per request a full replay runs (bounds the decode steps)


@dataclass(frozen=True)
class BurstTtft:
    """First-token times (seconds from the burst's arrival) of each request, in arrival order."""

    input_len: int
    budget_tokens: int
    ttft_seconds: tuple[float, ...]
    steps: int
    # per request: (last token − first token) / (output tokens − 1); empty for a TTFT-only replay
    tpot_seconds: tuple[float, ...] = ()

    @property
    def mean_seconds(self) -> float:
        return sum(self.ttft_seconds) / len(self.ttft_seconds)

    @property
    def max_seconds(self) -> float:
        return max(self.ttft_seconds)

    def percentile_seconds(self, q: float) -> float:
        """The ``q``-th percentile (0–100, nearest rank) of the first-token times."""
        if not 0 <= q <= 100:
            raise PlenaInputError("percentile", f"percentile {q} is outside 0-100")
        s = sorted(self.ttft_seconds)
        return s[max(0, math.ceil(q / 100 * len(s)) - 1)]

    @property
    def system_prefill_tps(self) -> float:
        """Prompt tokens of the burst over the time until the last first token (tokens/s)."""
        return len(self.ttft_seconds) * self.input_len / self.max_seconds

    @property
    def user_decode_speed(self) -> float:
        """Mean over requests of 1 / own time per output token (tokens/s per request)."""
        if not self.tpot_seconds:
            raise PlenaInputError("output_seq_len", "this replay did not run the decode")
        return sum(1.0 / t for t in self.tpot_seconds) / len(self.tpot_seconds)

    @property
    def user_prefill_speed(self) -> float:
        """Mean over requests of prompt tokens / own TTFT (tokens/s per request)."""
        return sum(self.input_len / t for t in self.ttft_seconds) / len(self.ttft_seconds)

    def to_dict(self) -> dict[str, float | int]:
        """The ``burst_ttft`` document of ``estimate --burst-ttft`` (SI: seconds, tokens/s)."""
        return {
            "requests": len(self.ttft_seconds),
            "input_seq_len": self.input_len,
            "max_num_batched_tokens": self.budget_tokens,
            "steps": self.steps,
            "mean_seconds": self.mean_seconds,
            "p50_seconds": self.percentile_seconds(50),
            "p90_seconds": self.percentile_seconds(90),
            "p99_seconds": self.percentile_seconds(99),
            "max_seconds": self.max_seconds,
            "system_prefill_tps": self.system_prefill_tps,
            "user_prefill_speed": self.user_prefill_speed,
        }


def burst_ttft(batch: int, input_len: int, budget_tokens: int,
               prefill_seconds: Callable[[int], float],
               decode_seconds: Callable[[int], float],
               output_len: int | None = None,
               decode_mean_seconds: Callable[[int], float] | None = None) -> BurstTtft:  # fmt: skip
    """Replay the chunked-prefill scheduler for ``batch`` requests of ``input_len`` prompt tokens
    arriving together. ``prefill_seconds(tokens)``: a prefill pass over that many prompt tokens;
    ``decode_seconds(n)``: a decode step of ``n`` requests (called with n ≥ 1).
    ``output_len``: also run every request to ``output_len`` tokens (decode-only steps cost
    ``decode_mean_seconds(n)``, a step of ``n`` requests averaged over the output) and record
    each request's time per output token, prefill interleaving included."""
    _check_burst(batch, input_len, budget_tokens, output_len)
    left = input_len  # prompt tokens still to prefill of the request at the queue head
    head, t, steps = 0, 0.0, 0
    ttft: list[float] = []
    finish: list[float] = []
    groups: list[list[int]] = []  # [requests, tokens still to generate] per first-token step
    per_request = output_len - 1 if output_len else -1  # -1: decode forever (TTFT only)
    while head < batch or any(g[1] > 0 for g in groups):
        decoding = sum(g[0] for g in groups if g[1] != 0)
        room, tokens, done = budget_tokens - decoding, 0, 0
        while room > 0 and head < batch:
            k = min(left, room)
            left, room, tokens = left - k, room - k, tokens + k
            if left == 0:
                head, done, left = head + 1, done + 1, input_len
        if tokens:
            t += prefill_seconds(tokens) + (decode_seconds(decoding) if decoding else 0.0)
        else:  # only reached with output_len: every prompt is in
            t += decode_mean_seconds(decoding)  # type: ignore[misc]
        steps += 1
        for g in groups:
            if g[1] > 0:
                g[1] -= 1
                finish += [t] * (g[0] if g[1] == 0 else 0)
        ttft += [t] * done
        if done:
            groups.append([done, per_request])
            finish += [t] * (done if per_request == 0 else 0)
    tpot = ()
    if output_len and output_len > 1:
        tpot = tuple((f - s) / (output_len - 1) for s, f in zip(ttft, finish, strict=True))
    return BurstTtft(input_len, budget_tokens, tuple(ttft), steps, tpot)


def _check_burst(batch: int, input_len: int, budget_tokens: int, output_len: int | None) -> None:
    for name, v, hi in (("batch_size", batch, MAX_BURST), ("input_seq_len", input_len, None),
                        ("output_seq_len", output_len, MAX_OUTPUT)):  # fmt: skip
        if v is not None and (v < 1 or (hi is not None and v > hi)):
            raise PlenaInputError(name, f"{name} must be 1..{hi or 'any'}; got {v}")
    if budget_tokens <= batch:
        raise PlenaInputError(
            "max_num_batched_tokens",
            f"a budget of {budget_tokens} tokens per step leaves no room for prompt tokens "
            f"once {batch} requests decode; it must exceed the batch size",
        )


class _Names:
    """The estimate names the step costs build with, imported once on first use and kept as
    class attributes (their modules import the evaluator; a ``from … import`` inside a method
    costs ~0.6 µs a call, ~10 of them a cold closed loop)."""

    loaded = False
    gpu_host: Any  # the modules and classes below, set by ``load``
    DecodeFloor: Any
    PlanCost: Any
    engine_network: Any
    Evaluator: Any
    block_scaled_ops: Any
    PricingMemo: Any

    @classmethod
    def load(cls) -> type[_Names]:
        from plena_opt.estimate import gpu_host
        from plena_opt.estimate.decode_floor import DecodeFloor
        from plena_opt.estimate.distributed import PlanCost
        from plena_opt.estimate.engine_network import engine_network
        from plena_opt.estimate.evaluator import Evaluator
        from plena_opt.estimate.gpu import block_scaled_ops
        from plena_opt.estimate.memo import PricingMemo

        cls.gpu_host, cls.DecodeFloor, cls.PlanCost = gpu_host, DecodeFloor, PlanCost
        cls.engine_network, cls.Evaluator = engine_network, Evaluator
        cls.block_scaled_ops, cls.PricingMemo = block_scaled_ops, PricingMemo
        cls.loaded = True
        return cls


def _names() -> type[_Names]:
    """``_Names``, loaded."""
    return _Names if _Names.loaded else _Names.load()


class EvaluatorStepCosts:
    """Step times from the evaluator for one (model, plan, chip, NoC): ``prefill_seconds`` is
    the static prefill pass of ``tokens / input_len`` full prompts (linear between whole
    prompt counts), ``decode_seconds`` the first decode step of ``n`` sequences after their
    prompts (KV = ``input_len``), linear between powers of two. A last chunk shorter than one
    prompt is priced as that share of a one-prompt pass's kernels plus the whole eager host
    time (``host_seconds``, ``estimate.gpu_host``). Each figure is the evaluator's own
    (``estimate`` / ``evaluate`` of the plan at that batch), but only the pass it reads is
    priced: no report, metrics, energy or warnings (``tests/serving/test_step_costs.py``)."""

    def __init__(self, model: ModelSpec, noc: object, memory: Memory, chip: GpuChipProfile,
                 workload: Workload, plan: Plan,
                 evaluators: dict | None = None) -> None:  # fmt: skip
        """``evaluators``: a cache of ``Evaluator`` by (batch, output length) shared by the
        step costs of many plans of one problem (a search), so their memos stay warm."""
        est = _names()
        self._evaluators = {} if evaluators is None else evaluators
        self._args = (model, est.engine_network(noc), memory, chip)  # the engine's all-reduce
        self.workload, self.plan = workload, plan
        self._cache: dict[int, PlanCost] = {}
        self._pre: dict[int, float] = {}
        self._whole: dict[int, PlanCost] = {}
        self._mean: dict[int, float] = {}
        self._dec0: dict[int, float] = {}
        self._block = est.block_scaled_ops(chip, workload, model)

    @cached_property
    def host_seconds(self) -> float:
        """Host time of the eager prefill forward (s): paid whole by a step however short its
        chunk. Worked out on first read (a short last chunk, a decode batch beyond the CUDA
        graphs): most step models never read it."""
        gpu_host = _names().gpu_host
        model, _, _, chip = self._args
        return gpu_host.ops_seconds(
            chip.eager_host, gpu_host.model_ops(model, self.plan.tp, self._block)
        )

    @cached_property
    def decode_floor(self) -> DecodeFloor | None:
        """The bytes a decode step of the plan streams at least, and their rate
        (``estimate.decode_floor``), from the one-prompt plan's footprint. Read only to pick
        where the open loop's search starts (``serving.spine.open_near``: it decides which step
        costs are priced, never a figure); None where the one-prompt plan is refused (the search
        then starts where it did) or the memory gives no bandwidth."""
        try:
            cost = self._first(1)  # the open loop's one-prompt prefill reads it too
            return _names().DecodeFloor.of(cost, self.workload.output_seq_len)
        except PlenaInputError:
            return None

    def _first(self, batch: int) -> PlanCost:
        """The plan priced at ``batch`` prompts and one output token: only the passes read
        (``prefill.latency_at(0)``, ``decode.latency_at(0)``: the ``latency_seconds`` of the
        full report's ``prefill`` and ``first_token_decode``) are priced, each on first use."""
        hit = self._cache.get(batch)
        if hit is None:  # the steady-state model calls this often
            hit = self._cache[batch] = _names().PlanCost(self._evaluator(batch, 1).ctx, self.plan)
        return hit

    def _prefill_at(self, batch: int) -> float:
        """The prefill pass of ``batch`` whole prompts (s; the report's ``latency_seconds``)."""
        hit = self._pre.get(batch)
        if hit is None:
            hit = self._pre[batch] = self._first(batch).prefill.latency_at(0)
        return hit

    def _first_decode_at(self, batch: int) -> float:
        """The first decode step of ``batch`` sequences (s; ``first_token_decode``'s
        ``latency_seconds``). With one pipeline stage, step 0 of the full decode pass that
        ``decode_mean_seconds`` prices (the same KV length, the same figure:
        ``tests/serving/test_step_costs.py``), so no one-token pass is priced for it."""
        hit = self._dec0.get(batch)
        if hit is None:  # kept: the attention-DP straggler reads it for every request count
            cost = self._full(batch) if self.plan.pp == 1 else self._first(batch)
            hit = self._dec0[batch] = cost.decode.latency_at(0)
        return hit

    def _full(self, batch: int) -> PlanCost:
        """The plan priced at ``batch`` over the workload's whole output (its passes priced
        on first use)."""
        hit = self._whole.get(batch)
        if hit is None:
            ctx = self._evaluator(batch, None).ctx
            hit = self._whole[batch] = _names().PlanCost(ctx, self.plan)
        return hit

    def _evaluator(self, batch: int, output_len: int | None) -> Evaluator:
        """The (shared) evaluator of the workload at ``batch`` (and ``output_len``)."""
        key = (batch, output_len)
        hit = self._evaluators.get(key)
        if hit is None:
            est = _names()  # the evaluator module itself, not the package's lazy attribute
            Evaluator = est.Evaluator  # noqa: N806 (the class)
            memo = self._evaluators.get(("memo", output_len))
            if memo is None:
                memo = self._evaluators.setdefault(("memo", output_len), est.PricingMemo())
            first = self._evaluators.get("first")  # the first context: the others derive
            if first is None:  # ``replace(workload, batch_size=…, output_seq_len=…)``, one check
                model, noc, memory, chip = self._args
                wl = self.workload
                wl = wl.with_lengths(batch, wl.output_seq_len if output_len is None else output_len)
                hit = self._evaluators["first"] = Evaluator(model, noc, memory, wl, chip, memo=memo)
            else:  # what a new Evaluator of that workload and memo holds (``with_lengths``)
                osl = self.workload.output_seq_len if output_len is None else output_len
                hit = Evaluator.of_context(first.ctx.with_lengths(batch, osl, memo))
            self._evaluators[key] = hit
        return hit

    def prefill_seconds(self, tokens: int) -> float:
        n = tokens / self.workload.input_seq_len
        lo = int(n)  # max(1, math.floor(n)) for the non-negative n read here
        if lo < 1:
            lo = 1
        pre = self._pre  # ``_prefill_at``'s kept figures, read first (its method on a miss)
        t_lo = pre.get(lo)
        if t_lo is None:
            t_lo = self._prefill_at(lo)
        if n <= lo:
            h = self.host_seconds
            return h + (t_lo - h) * n if n < 1 else t_lo
        t_hi = pre.get(lo + 1)
        if t_hi is None:
            t_hi = self._prefill_at(lo + 1)
        return t_lo + (n - lo) * (t_hi - t_lo)

    def decode_seconds(self, n: int) -> float:
        return _pow2_interp(n, self._first_decode_at)

    def decode_mean_seconds(self, n: int) -> float:
        """A decode step of ``n`` sequences averaged over the workload's output (KV growing from
        input to input + output): 1 / the estimate's ``tps_per_sequence``."""
        return _pow2_interp(n, self._mean_step)

    def decode_growth(self, n: int) -> float:
        """``decode_mean_seconds(n) - decode_seconds(n)`` (s): a decode step's growth over the
        output (the attention-DP straggler's KV part, ``serving.StepModel``) with the powers of
        two around ``n`` found once; each interpolation is ``_pow2_interp``'s expression, so
        the same floats."""
        lo = 1 << max(0, n.bit_length() - 1)
        m_lo, f_lo = self._mean_step(lo), self._first_decode_at(lo)
        if n == lo:
            return m_lo - f_lo
        hi, share = 2 * lo, (n - lo) / lo
        return (m_lo + share * (self._mean_step(hi) - m_lo)) - (
            f_lo + share * (self._first_decode_at(hi) - f_lo)
        )

    def decode_mean_and_growth(self, n: int) -> tuple[float, float]:
        """(``decode_mean_seconds(n)``, ``decode_growth(n)``) with the powers of two around
        ``n`` found once (s; the attention-DP straggler's first read of a request count,
        ``serving.StepModel``): each value is the expression of the method it stands for, so
        the same floats."""
        lo = 1 << max(0, n.bit_length() - 1)
        means, firsts = self._mean, self._dec0  # the two methods' kept figures, read first
        m_lo, f_lo = means.get(lo), firsts.get(lo)
        m_lo = self._mean_step(lo) if m_lo is None else m_lo
        f_lo = self._first_decode_at(lo) if f_lo is None else f_lo
        if n == lo:
            return m_lo, m_lo - f_lo
        hi, share = 2 * lo, (n - lo) / lo
        m_hi, f_hi = means.get(hi), firsts.get(hi)
        m_hi = self._mean_step(hi) if m_hi is None else m_hi
        f_hi = self._first_decode_at(hi) if f_hi is None else f_hi
        mean = m_lo + share * (m_hi - m_lo)
        return mean, mean - (f_lo + share * (f_hi - f_lo))

    def _mean_step(self, batch: int) -> float:
        hit = self._mean.get(batch)
        if hit is None:  # the decode pass alone: ``evaluate(plan).tps_per_sequence`` without
            hit = self._mean[batch] = 1.0 / self._full(batch).tps_per_sequence  # its metrics
        return hit


def _pow2_interp(n: int, at: Callable[[int], float]) -> float:
    """``at(n)``, linear between the powers of two around ``n`` (n ≥ 1)."""
    lo = 1 << max(0, n.bit_length() - 1)
    t_lo = at(lo)
    if n == lo:
        return t_lo
    return t_lo + (n - lo) / lo * (at(2 * lo) - t_lo)
