"""``ProblemSpec`` (what is priced) and the evaluator's declared interface."""

from __future__ import annotations

import hashlib
import json

from plena_opt.estimate.interface import PlanEvaluator, PlanScores
from plena_opt.estimate.problem import InlineDocument, ProblemSpec
from plena_opt.search.request import SearchRequest
from plena_opt.search.run.runner import default_study_name
from tests.search.run.test_search_fakes import FakeEvaluator


def test_inline_documents_keep_the_study_names_of_v0_1():
    """v0.1 named an inline document ``inline-<sha256(text)[:12]>/<name>.json`` in the spec; the
    same search must resume the same study (same default name and fingerprint)."""
    text = json.dumps({"num_devices": 8, "levels": []})
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    model_text = '{"model_type": "llama"}'
    model_digest = hashlib.sha256(model_text.encode()).hexdigest()[:12]
    new = ProblemSpec(
        model=InlineDocument(document=json.loads(model_text), name="my model", text=model_text),
        noc=InlineDocument(document=json.loads(text), text=text),
    )
    legacy = ProblemSpec(
        model=None,
        model_path=f"inline-{model_digest}/my_model.json",
        noc=f"inline-{digest}/noc.json",
    )
    assert new.identity() == legacy.identity()
    assert new.fingerprint() == legacy.fingerprint()
    a, b = SearchRequest(problem=new), SearchRequest(problem=legacy)
    assert default_study_name(a) == default_study_name(b)
    assert default_study_name(a).startswith("my_model-noc-")
    assert new.model_label() == "my model"


def test_an_inline_document_without_text_is_named_by_its_canonical_json():
    doc = {"b": 1, "a": 2}
    assert InlineDocument(document=doc).digest() == InlineDocument(document=dict(doc)).digest()
    assert InlineDocument(document=doc).digest() != InlineDocument(document={"a": 1}).digest()


def test_the_evaluator_and_the_test_fake_implement_the_protocol():
    problem = ProblemSpec(model="llama-3.2-1b", noc="illustrative_gpu_node_8").load()
    real = problem.evaluator()
    for ev in (real, FakeEvaluator()):
        assert isinstance(ev, PlanEvaluator)
        plan = next(p for p in real.legal_plans() if ev.num_devices == p.world_size)
        (scores,) = ev.evaluate_batch([plan])
        assert isinstance(scores, PlanScores)
    assert real.num_devices == 8
    assert real.memory_capacity_bytes == problem.memory.capacity_bytes


def test_a_hugging_face_model_id_names_a_study_without_a_slash():
    req = SearchRequest(problem=ProblemSpec(model="nvidia/DeepSeek-R1-NVFP4", noc="hgx-b200x8"))
    assert default_study_name(req).startswith("nvidia--DeepSeek-R1-NVFP4-hgx-b200x8-")
