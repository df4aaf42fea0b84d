"""Every serving figure and refusal of a grid of problems, as ``repr`` lines (issue 26, r9vec).

Run on two checkouts and compare the files byte for byte: a change meant to be exact (a faster
path to the same floats) must give the same file. Run:
``PYTHONPATH=DIR:DIR/DeepStack .venv/bin/python benchmarks/sweep_serving_figures.py OUT``
(``DIR``: the checkout measured). The grid: H100 and B200 nodes (``hgx-h100x8``,
``hgx-b200x8``); Llama-3.1-70B TP 8 / TP 4 × PP 2 / TP 2 × DP 4, Qwen3-235B-A22B EP 8 / TP 8 /
TP 4 × DP 2, Llama-3.1-8B TP 1 × DP 8 / TP 2 × PP 4; vLLM, SGLang, TensorRT-LLM; isl/osl
1k/1k, 8k/1k, 2k/256, 128/1, 512/2; range ratio 0 and 0.8; C 1, 4, 37, 64, 256, 1,000; a
closed loop and open loops at 0.2 and 0.9 of its throughput, each on a fresh step model and on
one sharing its evaluators; and each (node, model, plan, lengths, C) once as a static
``evaluate`` and ``estimate`` report. 5,760 figure-set lines and 480 static ones.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from itertools import product
from typing import TextIO

NODES = (("h100-sxm", "hgx-h100x8"), ("b200", "hgx-b200x8"))
MODELS = (
    ("llama-3.1-70b", ({"tp": 8}, {"tp": 4, "pp": 2}, {"tp": 2, "dp": 4})),
    ("qwen3-235b-a22b", ({"ep": 8}, {"tp": 8}, {"tp": 4, "dp": 2})),
    ("llama-3.1-8b", ({"tp": 1, "dp": 8}, {"tp": 2, "pp": 4})),
)
LENGTHS = ((1024, 1024), (8192, 1024), (2048, 256), (128, 1), (512, 2))
CONCURRENCY = (1, 4, 37, 64, 256, 1000)
OPEN_SHARES = (0.2, 0.9)  # open-loop rates as shares of the closed loop's throughput


def _err(e: Exception) -> str:
    return "ERR " + type(e).__name__ + repr(e.args)


def _loads(new: Callable[[], object], c: int, isl: int, osl: int, rr: float) -> list[str]:
    """The closed loop at ``c`` and the open loops at shares of its throughput (``new()``: the
    step model each one runs on)."""
    from plena_opt.errors import PlenaInputError
    from plena_opt.serving import OpenLoopWorkload, ServingWorkload, closed_loop, open_loop

    try:
        r = closed_loop(new(), ServingWorkload(c, isl, osl, rr))
    except PlenaInputError as e:
        return [_err(e)]
    out = [repr(r)]
    for share in OPEN_SHARES:
        try:
            rate = share * r.request_throughput_per_s
            out.append(repr(open_loop(new(), OpenLoopWorkload(rate, isl, osl, rr))))
        except PlenaInputError as e:
            out.append(_err(e))
    return out


def _problem(out: TextIO, env: tuple, plan: object, engine: str, isl: int, osl: int,
             rr: float) -> None:  # fmt: skip
    """Every concurrency of one (node, model, plan, engine, lengths, range ratio)."""
    from plena_opt.errors import PlenaInputError
    from plena_opt.estimate import Evaluator, Workload
    from plena_opt.serving import StepModel, engine_model

    chip_name, chip, noc, mem, model = env
    eng = engine_model(engine, float(chip.hbm.capacity_bytes.value))
    wl = Workload(batch_size=1, input_seq_len=isl, output_seq_len=osl, precision="fp8")
    shared: dict = {}
    head = (chip_name, model.name, plan, engine, isl, osl, rr)
    for c in CONCURRENCY:
        for mode, ev in (("fresh", None), ("shared", shared)):
            kept: list = []

            def new(ev: dict | None = ev, kept: list = kept) -> object:
                if ev is None or not kept:  # fresh: a new step model for each loop
                    kept[:] = [StepModel.from_problem(model, noc, mem, chip, wl, plan, eng,
                                                      evaluators=ev, range_ratio=rr)]  # fmt: skip
                return kept[0]

            try:
                res = _loads(new, c, isl, osl, rr)
            except PlenaInputError as e:
                res = [_err(e)]
            print(*head, c, mode, *res, sep="|", file=out)
        if engine != "vllm" or rr:
            continue
        try:
            static = Workload(batch_size=c, input_seq_len=isl, output_seq_len=osl, precision="fp8")
            e = Evaluator(model, noc, mem, static, chip)
            res = [repr(e.evaluate(plan)), repr(e.estimate(plan).to_dict())]
        except PlenaInputError as ex:
            res = [_err(ex)]
        print("static", chip_name, model.name, plan, isl, osl, c, *res, sep="|", file=out)


def main(path: str) -> None:
    from deepstack import load_noc_profile

    from plena_opt.chip import load_chip
    from plena_opt.estimate import Plan
    from plena_opt.estimate.gpu import gpu_memory
    from plena_opt.models import load_model

    with open(path, "w") as out:
        for chip_name, noc_name in NODES:
            chip, noc = load_chip(chip_name), load_noc_profile(noc_name)
            for name, plans in MODELS:
                env = (chip_name, chip, noc, gpu_memory(chip), load_model(name))
                for fields, engine, (isl, osl), rr in product(
                    plans, ("vllm", "sglang", "trtllm"), LENGTHS, (0.0, 0.8)
                ):
                    _problem(out, env, Plan(**fields), engine, isl, osl, rr)


if __name__ == "__main__":
    main(sys.argv[1])
