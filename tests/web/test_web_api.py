"""The web UI's JSON API (``/api/``): results match the simulator, bad input is 422 naming the
field (never 500), sizes are capped, the studies tab reads the store, the page ships no CDN."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from plena_opt.simulator import build_schedule, simulate, validate_trace  # noqa: E402
from plena_opt.simulator.engine import DepReason, per_op_durations  # noqa: E402
from plena_opt.web import limits  # noqa: E402
from plena_opt.web.app import STATIC, create_app  # noqa: E402
from plena_opt.web.views import REASON_TEXT  # noqa: E402


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(storage=None), base_url="http://127.0.0.1")


def _training(schedule="1f1b", pp=4, vpp=1, m=8, durations=None, **kw) -> dict:
    body = {
        "mode": "training",
        "training": {
            "schedule": schedule,
            "pp": pp,
            "vpp": vpp,
            "microbatches": m,
            "durations_ms": durations or {"F": 1.0, "B": 2.0},
        },
        "samples": 200,
        "seed": 3,
    }
    body.update(kw)
    return body


def test_simulate_matches_the_library(client) -> None:
    r = client.post("/api/simulate", json=_training())
    assert r.status_code == 200
    doc = r.json()
    res = simulate(build_schedule("1f1b", 4, 8), {"F": 1.0, "B": 2.0}, "sigma=0.05", 200, 3)
    det = doc["timelines"]["deterministic"]
    assert doc["n_ops"] == res.plan.n_ops == len(doc["ops"]["name"])
    assert det["makespan"] == pytest.approx(33.0)  # (m + p − 1)(F + B)
    assert doc["ops"]["name"] == [o.trace_name for o in res.plan.ops]
    for j, t in enumerate(res.deterministic.ops):
        assert det["start"][j] == t.start and det["end"][j] == t.end
        assert det["rank_free_at"][j] == t.rank_free_at
        if t.binding is None:
            assert det["binding"][j] == -1 and not t.deps
            continue
        src, reason = doc["ops"]["deps"][j][det["binding"][j]]
        assert src == t.binding.src and doc["ops"]["reasons"][reason] == t.binding.reason.value
    assert det["n_waits"] == sum(t.wait > 0 for t in res.deterministic.ops)
    assert det["critical_path"] == list(res.deterministic.critical_path)
    mc = doc["monte_carlo"]
    assert mc["quantiles"][0]["metric"] == "makespan"
    assert mc["quantiles"][0]["p99"] == pytest.approx(res.mc.makespan.p99)
    assert set(doc["timelines"]) == {"deterministic", "p50", "p99"}
    assert set(mc["criticality_by_type"]) == {"F", "B"}


def test_every_reason_has_words() -> None:
    assert set(REASON_TEXT) == {r.value for r in DepReason}


def test_interleaved_durations_are_per_stage(client) -> None:
    doc = client.post("/api/simulate", json=_training("interleaved-1f1b", 4, 2, 8)).json()
    plan = build_schedule("interleaved-1f1b", 4, 8, 2)
    want = simulate(plan, per_op_durations(plan, {"F": 1.0, "B": 2.0})).makespan
    assert doc["timelines"]["deterministic"]["makespan"] == pytest.approx(want)
    assert any("F/v" in n for n in doc["notes"])


def test_simulate_comm_adds_a_comm_lane(client) -> None:
    body = _training(durations={"F": 1.0, "B": 2.0, "XF": 0.25, "XB": 0.25}, simulate_comm=True)
    doc = client.post("/api/simulate", json=body).json()
    lanes = doc["ops"]["lane"]
    comm = [j for j, lane in enumerate(lanes) if lane == "comm"]
    # 1F1B p=4, m=8: 3 forward sends and 3 backward sends per micro-batch
    assert len(comm) == 2 * 3 * 8
    assert {doc["ops"]["op_type"][j] for j in comm} == {"XF", "XB"}
    assert doc["simulate_comm"] is True
    off = client.post("/api/simulate", json=_training()).json()
    assert "comm" not in off["ops"]["lane"]
    assert (
        doc["timelines"]["deterministic"]["makespan"]
        > off["timelines"]["deterministic"]["makespan"]
    )


def test_serving_plan_prefilled_from_the_estimate(client) -> None:
    est = client.post("/api/estimate", json={"tp": 8, "pp": 4, "max_window_steps": 4}).json()
    assert {"P_s0", "D0_s3", "D_s2", "XP", "XD"} <= set(est["durations_ms"])
    body = {"mode": "serving", "serving": {"tp": 8, "pp": 4, "max_window_steps": 4}, "samples": 50}
    doc = client.post("/api/simulate", json=body).json()
    assert doc["mode"] == "serving" and doc["simulate_comm"] is True
    metrics = {q["metric"] for q in doc["monte_carlo"]["quantiles"]}
    assert {"ttft", "tps"} <= metrics
    assert doc["analytic"]["ttft_ms"] == pytest.approx(est["ttft_ms"])
    assert "comm" in doc["ops"]["lane"]
    body["simulate_comm"] = False
    off = client.post("/api/simulate", json=body).json()
    assert "comm" not in off["ops"]["lane"]
    assert any("communication not simulated" in n for n in off["notes"])


def test_serving_duration_override_changes_the_timeline(client) -> None:
    body = {"mode": "serving", "serving": {"tp": 8, "pp": 4, "max_window_steps": 4}, "samples": 0}
    base = client.post("/api/simulate", json=body).json()
    slow = {**body, "serving": {**body["serving"], "durations_ms": {"D_s2": 500.0}}}
    doc = client.post("/api/simulate", json=slow).json()
    assert doc["durations_ms"]["D_s2"] == 500.0
    assert doc["durations_ms"]["D_s1"] == base["durations_ms"]["D_s1"]
    det, ref = doc["timelines"]["deterministic"], base["timelines"]["deterministic"]
    assert det["makespan"] > ref["makespan"] + 500.0  # several later decode steps on stage 2
    j = doc["ops"]["name"].index("rank2/D/chunk_a/mb0/step2")
    assert det["end"][j] - det["start"][j] == pytest.approx(500.0)


def test_trace_download_validates(client) -> None:
    body = _training(
        "bigmac-vpp", 4, 2, 8, {"F": 1, "B": 2, "VF": 0.5, "VB": 1, "GF": 0.5, "GB": 1}
    )
    for sample in ("deterministic", "p99"):
        r = client.post("/api/trace", json={**body, "sample": sample})
        assert r.status_code == 200 and "attachment" in r.headers["content-disposition"]
        trace = r.json()
        assert validate_trace(trace) == []
        names = {e["name"] for e in trace["traceEvents"] if e["ph"] == "X"}
        assert "rank0/F/chunk_b/mb0" in names


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (_training(pp=0), "training.pp"),
        (_training(schedule="dualpipe"), "training.schedule"),
        (_training(durations={"F": 1.0}), "training.durations_ms.B"),
        (_training(durations={"F": 1.0, "B": -2.0}), "training.durations_ms.B"),
        (_training(durations={"F": 1.0, "B": 2.0, "W": 1.0}), "training.durations_ms.W"),
        (_training(vpp=2), "training.vpp"),
        (_training("interleaved-1f1b", 4, 2, 6), "training.microbatches"),
        (_training(samples=limits.MAX_SAMPLES + 1), "samples"),
        (_training(seed=2**32), "seed"),
        (_training(noise="sigma=-1"), "noise.jitter_sigma"),
        (_training(colour="red"), "colour"),
        (_training(pp=64, m=4096, samples=100_000), "samples"),
        (_training(pp=256, m=8192, samples=0), "training.microbatches"),
        ({"mode": "serving", "serving": {"tp": 3}}, "serving.plan"),
        ({"mode": "serving", "serving": {"model": "no-such-model"}}, "serving.model"),
        ({"mode": "serving", "serving": {"noc": "/etc/passwd"}}, "serving.noc"),
        ({"mode": "serving", "serving": {"durations_ms": {"Q": 1}}}, "serving.durations_ms.Q"),
    ],
)
def test_bad_input_is_422_naming_the_field(client, body, field) -> None:
    r = client.post("/api/simulate", json=body)
    assert r.status_code == 422, r.text
    doc = r.json()
    assert doc["field"].startswith(field), doc
    assert doc["detail"][0]["msg"]


def test_body_size_is_capped(client) -> None:
    big = {"F": 1.0, "B": 2.0} | {f"k{i}": 1.0 for i in range(100_000)}
    r = client.post("/api/simulate", json=_training(durations=big))
    assert r.status_code == 413


def test_chunked_body_is_capped_too(client) -> None:
    big = b'{"mode": "training", "noise": "' + b"x" * (2 * limits.MAX_BODY_BYTES) + b'"}'

    def chunks():
        for i in range(0, len(big), 1 << 16):
            yield big[i : i + (1 << 16)]

    r = client.post("/api/simulate", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["field"] == "body"
    ok = client.post(
        "/api/simulate",
        content=iter([b'{"mode": "training", "samples": 0}']),
        headers={"content-type": "application/json"},
    )
    assert ok.status_code == 200 and ok.json()["n_ops"] == 64


def test_studies_and_front(tmp_path) -> None:
    from plena_opt.cli.main import main

    store = tmp_path / "s.log"
    argv = ["search", "--model", "gpt-oss-20b", "--noc", "illustrative_gpu_node_8"]
    argv += ["--input-seq", "256", "--output-seq", "8", "--sampler", "exhaustive", "--quiet"]
    argv += ["--storage", str(store), "--study", "web", "--recheck", "0", "--max-ttft-ms", "300"]
    assert main(argv) == 0
    c = TestClient(create_app(storage=str(store)), base_url="http://127.0.0.1")
    studies = c.get("/api/studies").json()
    assert [s["name"] for s in studies] == ["web"]
    front = c.get("/api/studies/web/front").json()
    trials = front["trials"]
    # 60 shorthand plans + 40 explicit MoE splits (issue 24: moe_tp over tp·ep)
    assert len(trials) == 100 and all(t["on_front"] <= t["feasible"] for t in trials)
    assert any(t["on_front"] for t in trials) and not all(t["feasible"] for t in trials)
    for t in trials:  # infeasible plans keep their objective values (stored as PRUNED trials)
        assert len(t["values"]) == 3 and t["values"][0] == pytest.approx(t["ttft_ms"])
    assert front["problem"]["model"] == "gpt-oss-20b"
    assert front["not_in_form"] == []  # a built-in problem opens in the simulator
    assert c.get("/api/studies/nope/front").status_code == 404
    empty = TestClient(
        create_app(storage=str(tmp_path / "absent.log")), base_url="http://127.0.0.1"
    )
    assert empty.get("/api/studies").json() == []
    assert not (tmp_path / "absent.log").exists()


def test_a_problem_the_form_cannot_show_is_named() -> None:
    from plena_opt.api import ProblemSpec
    from plena_opt.web.service import not_in_form

    base = ProblemSpec(model="gpt-oss-20b", batch_size=4, input_seq=256).identity()
    assert not_in_form(base) == []
    gpu = ProblemSpec(chip="h200-sxm", noc="hgx-h200x8", precision="fp8", devices=4).identity()
    assert not_in_form(gpu) == ["chip", "precision", "devices"]
    assert not_in_form({**base, "noc": "my/noc.json", "fixed_capacity_gib": 80.0}) == [
        "noc",
        "fixed_capacity_gib",
    ]
    assert not_in_form({**base, "a_later_field": 1}) == ["a_later_field"]
    assert not_in_form(None) == ["problem"]


def test_page_ships_everything_itself(client) -> None:
    page = client.get("/")
    assert page.status_code == 200 and 'type="module"' in page.text
    files = sorted(Path(STATIC).glob("*"))
    assert {f.suffix for f in files} <= {".html", ".js", ".css"}
    for f in files:
        text = f.read_text()
        assert not re.search(r"(src|href)=\"https?:", text), f.name
        assert "import(" not in text and not re.search(r"from \"https?:", text), f.name
        assert client.get(f"/static/{f.name}").status_code == 200


def test_a_precision_study_shows_each_plans_precision(tmp_path) -> None:
    """--precisions: the study tab's plans carry their format, and the form (which has one
    precision) refuses to open them, naming precision."""
    from plena_opt.cli.main import main

    store = tmp_path / "p.log"
    argv = ["search", "--model", "llama-3.2-1b", "--chip", "h200-sxm", "--noc", "hgx-h200x8"]
    argv += ["--precisions", "bf16,fp8", "--quiet", "--recheck", "0", "--storage", str(store)]
    assert main([*argv, "--study", "prec"]) == 0
    front = (
        TestClient(create_app(storage=str(store)), base_url="http://127.0.0.1")
        .get("/api/studies/prec/front")
        .json()
    )
    assert {t["plan"]["precision"] for t in front["trials"]} == {"bf16", "fp8"}
    assert all(t["label"].endswith(t["plan"]["precision"]) for t in front["trials"])
    assert "precision" in front["not_in_form"]
