"""The typed serving message (``ServingDecisions``) and the stop token of ``decide_serving``."""

from __future__ import annotations

import math

import optuna
import pytest
from plena_proto import plena_opt_pb2 as pb

from plena_opt import api
from plena_opt.api.serving_wire import decisions_from_proto, decisions_to_proto
from plena_opt.estimate.problem import ProblemSpec
from plena_opt.search.request import SearchRequest
from plena_opt.search.storage.storage import open_storage
from plena_opt.stop import StopToken


def _request(**kw) -> SearchRequest:
    problem = ProblemSpec(
        model="llama-3.2-1b", chip="h200-sxm", noc="hgx-h200x8", memory=None, input_seq=512,
        output_seq=16,
    )  # fmt: skip
    return SearchRequest(
        problem=problem, sampler="exhaustive", batch_sizes=[8, 64], serving="both",
        objectives=["ttft", "tps-per-device", "tps-per-user"], **kw,
    )  # fmt: skip


def _same(a, b) -> bool:
    """Equal documents, NaN equal to NaN."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if isinstance(a, str):  # an enum of str (the request's default percentile) is its value
        return isinstance(b, str) and getattr(a, "value", a) == b
    return a == b and type(a) is type(b)


@pytest.fixture(scope="module")
def decided(tmp_path_factory):
    store = str(tmp_path_factory.mktemp("s") / "s.log")
    req = _request(max_tpot_ms=40.0, precisions=["bf16", "fp8"], storage=store, study="w")
    problem = req.problem.load()
    result = api.search_plans(req, problem)
    checks = api.recheck_front(result, problem, top_k=2, samples=40, seed=1)
    api.decide_serving(result, checks, req, problem)
    return req, problem, result, store


def test_the_typed_message_carries_the_whole_document(decided):
    _, _, result, _ = decided
    doc = result.serving
    assert (
        doc["verdicts"]
        and doc["comparison"]["verdict"]
        and doc["comparison"]["study"] == ("w-serving")
    )
    msg = pb.SearchResult()
    decisions_to_proto(doc, msg.serving)
    wire = pb.SearchResult.FromString(msg.SerializeToString())
    assert _same(doc, decisions_from_proto(wire.serving))
    cmp = wire.serving.comparison
    assert cmp.verdict == doc["comparison"]["verdict"] and not cmp.partial
    best = cmp.disaggregated.front[0]
    assert best.prefill.workers >= 1 and best.decode.precision == best.prefill.precision
    assert best.kv_transfer_seconds > 0 and best.ttft_seconds > best.kv_transfer_seconds
    assert cmp.aggregated.front[0].HasField("interference_seconds_per_token")
    assert wire.serving.sla.max_tpot_seconds == 0.04 and not wire.serving.sla.HasField(
        "max_ttft_seconds"
    )
    # nothing asked: no message, and back to {}
    empty = pb.SearchResult()
    decisions_to_proto({}, empty.serving)
    assert not empty.HasField("serving") and decisions_from_proto(empty.serving) == {}


def test_a_stopped_comparison_is_partial_and_not_stored(decided, tmp_path):
    req, problem, result, store = decided
    stored = optuna.load_study(study_name="w-serving", storage=open_storage(store))
    n_trials = len(stored.trials)
    token = StopToken()
    token.set("cancelled")
    result.serving.clear()
    doc = api.decide_serving(result, [], req, problem, stop=token)["comparison"]
    assert doc["partial"] and doc["stop_reason"] == "cancelled"
    assert "verdict" not in doc and "study" not in doc and "both" not in doc
    again = optuna.load_study(study_name="w-serving", storage=open_storage(store))
    assert len(again.trials) == n_trials  # the complete stored comparison is kept
    msg = pb.ServingDecisions()
    decisions_to_proto(result.serving, msg)
    assert msg.comparison.partial and msg.comparison.stop_reason == "cancelled"
    assert _same(result.serving, decisions_from_proto(msg))


def test_the_stop_token_is_polled_while_workers_are_priced(decided, monkeypatch):
    """A deadline that passes after a few workers: the fronts of the workers priced by then."""
    import plena_opt.search.serving.disaggregated as dis

    req, problem, result, _ = decided
    token = StopToken()
    priced = []
    real = dis.price_worker

    def counting(*a, **kw):
        priced.append(1)
        if len(priced) == 30:
            token.set("deadline")
        return real(*a, **kw)

    full = dis.ServingSpace.build(problem, [8, 64], {}, precisions=["bf16", "fp8"])
    n_full = len(full.aggregated) + len(full.workers)
    monkeypatch.setattr(dis, "price_worker", counting)
    mem = req.model_copy(update={"storage": ":memory:"})
    result.serving.clear()
    doc = api.decide_serving(result, [], mem, problem, stop=token)["comparison"]
    assert len(priced) == 30 < n_full  # no worker priced after the token was set
    assert doc["partial"] and doc["stop_reason"] == "deadline"
