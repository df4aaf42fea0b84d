"""r16trim: the open loop's first guess is the secant through its bracket's two priced ends;
its fixed points read kept decode lines with ``dict.get``; the search start reads the decode
floor once (issue 26). Every figure is the one the long way gives; fewer decode counts are
read for the first time."""

from __future__ import annotations

import importlib
import math

import pytest

from plena_opt.serving import OpenLoopWorkload, ServingWorkload, closed_loop, open_loop
from plena_opt.serving.pilot import Residual, secant_guess
from tests.estimate._step_models import h100_step_model


@pytest.mark.parametrize("slope", [0.0, 0.05, 0.5, 0.95])
@pytest.mark.parametrize("root", [0.5 + 2.0**-30, 0.61, 0.75, 0.98, 0.9999])
def test_secant_from_two_ends_lands_within_the_last_interval(slope: float, root: float) -> None:
    """With both ends of [0.5, 1] seen (f(0.5) > 0 ≥ f(1): the root is inside) the guess is
    within 2⁻⁴⁴ of the root; the two ends cost no evaluation."""

    def big_f(x: float) -> float:
        return root + slope * (root - x) * (1 + x)

    f = Residual(lambda x: big_f(x) - x)
    f(0.5), f(1.0)
    guess = secant_guess(f, 1.0, 0.5, 1.0, 2.0**-44, 0.5)
    assert abs(guess - root) < 2.0**-44
    assert len(f.seen) <= 2 + 6


def test_secant_from_equal_ends_takes_the_fixed_point_step() -> None:
    """Two ends with equal residuals give no secant: the fixed-point step, as without x1."""
    seen_a, seen_b = {}, {}
    fa = Residual(lambda x: 0.5 - x if x not in (0.25, 0.75) else 0.0, seen_a)
    fb = Residual(lambda x: 0.5 - x if x not in (0.25, 0.75) else 0.0, seen_b)
    assert secant_guess(fa, 0.25, 0.0, 1.0, 1e-12, 0.75) == secant_guess(fb, 0.25, 0.0, 1.0, 1e-12)


CASES = [
    ("qwen3-235b-a22b", {"ep": 8}, 256, 0.0),
    ("qwen3-235b-a22b", {"ep": 8}, 256, 0.8),
    ("qwen3-235b-a22b", {"ep": 8}, 64, 0.0),
    ("llama-3.1-70b", {"tp": 8}, 256, 0.0),
    ("llama-3.1-70b", {"tp": 8}, 64, 0.8),
    ("llama-3.1-70b", {"tp": 4, "pp": 2}, 37, 0.8),
]


def _without_x1(f: Residual, x0: float, lo: float, hi: float, tol: float,
                x1: float | None = None) -> float:  # fmt: skip
    """``secant_guess`` as the open loop called it before r16trim (the fixed-point step first)."""
    return secant_guess(f, x0, lo, hi, tol)


@pytest.mark.parametrize(("name", "fields", "c", "ratio"), CASES)
def test_open_loop_from_the_bracket_secant_is_the_fixed_point_steps(
    name: str, fields: dict, c: int, ratio: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The open loop with the bracket's secant gives the figures of the open loop whose guess
    starts with the fixed-point step (before r16trim), at 0.2, 0.5 and 0.9 of the closed loop's
    rate, and reads no more decode counts (the benchmark's rows at C = 256: fewer)."""
    step = h100_step_model(name, fields, ratio)
    rate = closed_loop(step, ServingWorkload(c, 1024, 1024, ratio)).request_throughput_per_s
    fewer = 0
    for share in (0.2, 0.5, 0.9):
        wl = OpenLoopWorkload(share * rate, 1024, 1024, ratio)
        new = h100_step_model(name, fields, ratio)
        got = open_loop(new, wl)
        with monkeypatch.context() as mp:
            mp.setattr(
                importlib.import_module("plena_opt.serving.open_loop"),
                "secant_guess",
                _without_x1,
            )
            old = h100_step_model(name, fields, ratio)
            want = open_loop(old, wl)
        assert got == want
        assert len(new._decode) <= len(old._decode)
        fewer += len(new._decode) < len(old._decode)
    if c == 256 and fields == {"ep": 8}:
        assert fewer >= 1


@pytest.mark.parametrize(("name", "fields"), [("qwen3-235b-a22b", {"ep": 8}),
                                              ("llama-3.1-70b", {"tp": 8})])  # fmt: skip
def test_decode_floor_reader_is_the_per_call_read(name: str, fields: dict) -> None:
    step = h100_step_model(name, fields, 0.0)
    read = step.decode_floor_reader()
    for n in (0.0, 1.0, 3.5, 64.0, 511.0):
        assert read(n) == step.decode_floor_seconds(n) == step.costs.decode_floor.seconds(n)

    class Bare:  # step costs without a floor
        pass

    step.costs = Bare()
    assert step.decode_floor_reader()(4.0) is None and step.decode_floor_seconds(4.0) is None


def test_kept_lines_give_the_decode_read() -> None:
    """A fixed point's inline read of a kept line equals ``decode_seconds`` at whole and
    fractional counts (kept and not)."""
    from plena_opt.serving.open_loop import _tpot_at

    step = h100_step_model("qwen3-235b-a22b", {"ep": 8}, 0.8)
    wl = OpenLoopWorkload(2.0, 1024, 1024, 0.8)
    at = _tpot_at(step, wl)
    twin = h100_step_model("qwen3-235b-a22b", {"ep": 8}, 0.8)
    for n in (0.5, 1.0, 7.25, 8.0, 8.75, 100.125, 100.5, 7.5):
        t, _ = at(n)
        twin.decode_seconds(n)  # the same counts priced on the twin, read the long way
        assert not math.isnan(t)
    assert step.decode_lines and step.decode_lines == twin.decode_lines
    for n in (7.25, 8.75, 100.5):
        lo = int(n)
        line = step.decode_lines[lo]
        assert line[0] + (n - lo) * line[1] == twin.decode_seconds(n)
