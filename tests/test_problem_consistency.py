"""A plan's price is a function of the problem and the plan alone, and a GPU chip without a
memory is priced on its own HBM in every front end (library, CLI, gRPC request mapping)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from plena_opt.chip.gpu.profile import profiles_dir
from plena_opt.estimate.problem import InlineDocument, ProblemSpec, names_gpu_chip


def _evaluator(routing: str):
    spec = ProblemSpec(model="gpt-oss-120b", noc="illustrative_gpu_cluster_32", routing=routing)
    return spec.load().evaluator()


@pytest.mark.parametrize("routing", ["power_law", "random", "balanced"])
def test_a_plan_costs_the_same_whatever_was_priced_before_it(routing: str) -> None:
    # power_law rows realise one step of exactly the asked tokens: a longer draw's first rows
    # differ from a shorter draw, so pricing a big micro-batch first used to change the
    # small plans' EP all-to-all (ep_dispatch 0.24482 vs 0.24716 ms on tp8 ep2 pp2)
    ev = _evaluator(routing)
    plans = [p for p in ev.legal_plans() if p.ep > 1][:40]
    forward = ev.evaluate_batch(plans)
    backward = _evaluator(routing).evaluate_batch(plans[::-1])[::-1]
    for plan, a, b in zip(plans, forward, backward, strict=True):
        assert dataclasses.astuple(a) == dataclasses.astuple(b), plan
    for i in (0, len(plans) // 2, len(plans) - 1):
        alone = _evaluator(routing).evaluate(plans[i])
        assert dataclasses.astuple(alone) == dataclasses.astuple(forward[i]), plans[i]


def _gpu_document() -> dict:
    return json.loads((profiles_dir() / "h200-sxm.json").read_text())


def test_a_gpu_chip_without_a_memory_is_priced_on_its_hbm_from_the_library() -> None:
    spec = ProblemSpec(model="llama-3.1-8b", noc="h200x32", chip="h200-sxm")
    assert spec.memory is None
    assert spec.load().memory.name == "h200-sxm-hbm"
    # the same problem written the CLI's way names the same study
    assert (
        spec.fingerprint()
        == ProblemSpec(
            model="llama-3.1-8b", noc="h200x32", chip="h200-sxm", memory=None
        ).fingerprint()
    )
    # a memory the user names explicitly is kept (a what-if on other memory)
    explicit = ProblemSpec(chip="h200-sxm", memory="fictional-stacked-dram")
    assert explicit.memory == "fictional-stacked-dram"
    # a PLENA chip keeps the default stacked DRAM
    assert ProblemSpec().memory is not None


def test_an_inline_or_file_gpu_chip_is_a_gpu_chip(tmp_path) -> None:
    doc = _gpu_document()
    inline = InlineDocument(document=doc, name="my-gpu", text=json.dumps(doc))
    assert names_gpu_chip(inline)
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(doc))
    assert names_gpu_chip(str(path))
    assert not names_gpu_chip("plena-default") and not names_gpu_chip(None)
    assert not names_gpu_chip(str(tmp_path / "missing.json"))
    spec = ProblemSpec(model="llama-3.1-8b", noc="h200x32", chip=inline)
    assert spec.memory is None and spec.load().memory.name.endswith("-hbm")


def test_the_grpc_request_mapping_gives_an_inline_gpu_chip_its_hbm() -> None:
    from plena_proto import plena_opt_pb2 as pb
    from plena_server.search_request import problem_spec

    from plena_opt.estimate.plan import Workload

    system = pb.SystemSpec()
    system.model.name = "llama-3.1-8b"
    system.noc.name = "h200x32"
    system.chip.json = json.dumps(_gpu_document())
    spec = problem_spec(system, Workload(batch_size=8))
    assert spec.memory is None and spec.load().memory.name.endswith("-hbm")
