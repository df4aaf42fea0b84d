"""The studies tab's serving decisions: a serving comparison study (``plena-opt search --serving
both``) through ``/api/studies/{name}/serving`` (typed, SI units, caps, 422/404) and in a real
headless Chromium (points by mode and colour, SLA misses grey, the verdict, opening plans); a plan
study with an SLA drawn per user vs per device.

The studies come from small real searches (llama-3.1-8b on illustrative_gpu_cluster_32, batches
8 and 32, no re-check): ``sv`` pairs exhaustively (its stored deployments are both fronts),
``so`` with ``--serving-sampler optuna`` (every scored deployment stored, most missing the SLA).
"""

from __future__ import annotations

import os
import shlex

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from plena_opt.web import limits  # noqa: E402
from plena_opt.web.app import create_app  # noqa: E402
from tests.web_support import browser, chromium_path, running_app  # noqa: E402

SEARCH = ["search", "--model", "llama-3.1-8b", "--noc", "illustrative_gpu_cluster_32"]
SEARCH += ["--batch-sizes", "8,32", "--recheck", "0", "--quiet", "--serving", "both"]
SLA = {"max_ttft_seconds": 0.5, "max_tpot_seconds": 0.05}
AGG_FILL, DISAGG_FILL, GREY_FILL = "rgb(47, 111, 219)", "rgb(224, 123, 31)", "rgb(201, 205, 212)"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    from plena_opt.cli.main import main

    path = str(tmp_path_factory.mktemp("serving") / "s.log")
    sla = ["--max-ttft-ms", "500", "--max-tpot-ms", "50"]
    assert main([*SEARCH, *sla, "--storage", path, "--study", "sv"]) == 0
    optuna = ["--serving-sampler", "optuna", "--trials", "40", "--max-ttft-ms", "300"]
    assert main([*SEARCH, *optuna, "--max-tpot-ms", "30", "--storage", path, "--study", "so"]) == 0
    return path


@pytest.fixture(scope="module")
def client(store) -> TestClient:
    return TestClient(create_app(storage=store), base_url="http://127.0.0.1")


def _stored(store: str, name: str):
    import optuna

    from plena_opt.search.storage.storage import open_storage

    return optuna.load_study(study_name=name, storage=open_storage(store))


def test_studies_are_listed_with_their_kind(client) -> None:
    kinds = {s["name"]: s["kind"] for s in client.get("/api/studies").json()}
    assert kinds == {"sv": "plans", "sv-serving": "serving", "so": "plans", "so-serving": "serving"}


def test_serving_study_is_typed_in_si_units(client, store) -> None:
    doc = client.get("/api/studies/sv-serving/serving").json()
    stored = _stored(store, "sv-serving")
    assert doc["serving_comparison_of"] == "sv"
    assert doc["sla"] == {**SLA, "min_tps_per_seq": None}
    assert doc["verdict"] == stored.user_attrs["verdict"] and doc["verdict"].startswith("disagg")
    assert doc["metric_names"] == stored.metric_names
    assert [t["number"] for t in doc["trials"]] == [t.number for t in stored.trials]
    by_number = {t.number: t for t in stored.trials}
    for t in doc["trials"]:
        a = by_number[t["number"]].user_attrs
        for key in ("ttft_seconds", "tpot_seconds", "tps_per_device", "tps_per_user"):
            assert t[key] == a[key]
        assert t["tps_per_user"] == pytest.approx(1 / t["tpot_seconds"], rel=1e-12)
        # the SLA judged independently of the stored constraint values
        meets = t["ttft_seconds"] <= 0.5 and t["tpot_seconds"] <= 0.05
        assert t["meets_sla"] is meets is True  # an exhaustive comparison stores its fronts
        assert t["on_front"]  # each stored deployment is on its mode's front
        assert sum(p["workers"] * p["devices_per_worker"] for p in t["pools"]) == t["devices"]
    # goodput and winner recomputed from the trials, and the verdict's ratio
    good = {
        m: max(t["tps_per_device"] for t in doc["trials"] if t["serving"] == m)
        for m in ("aggregated", "disaggregated")
    }
    assert {m["mode"]: m["goodput_tps_per_device"] for m in doc["modes"]} == good
    assert doc["winner"] == "disaggregated"
    ratio = good["disaggregated"] / good["aggregated"]
    assert doc["goodput_ratio"] == pytest.approx(ratio) and f"x{ratio:.2f}" in doc["verdict"]


def test_an_aggregated_plan_is_the_stored_one(client) -> None:
    """The plan the page opens (dims from params, MoE mode and overlap from the label) prices to
    the stored deployment's TTFT in the estimate the simulator form uses (its tokens/s differ:
    the aggregated serving figures charge prefill interference), and the other overlap not."""
    doc = client.get("/api/studies/sv-serving/serving").json()
    agg = [t for t in doc["trials"] if t["serving"] == "aggregated"]
    assert agg and all(t["simulate_commands"] == [] for t in agg)
    assert {t["plan"]["comm_overlap"] for t in agg} == {"full"}  # every front plan overlaps
    p = doc["problem"]
    for t in agg[:2]:
        body = {k: p[k] for k in ("model", "noc", "memory", "input_seq", "output_seq")}
        est = client.post("/api/estimate", json={**body, **t["plan"]}).json()
        assert est["ttft_ms"] == pytest.approx(t["ttft_seconds"] * 1e3, rel=1e-9)
        other = {**t["plan"], "comm_overlap": "none"}
        est = client.post("/api/estimate", json={**body, **other}).json()
        assert est["ttft_ms"] != pytest.approx(t["ttft_seconds"] * 1e3, rel=1e-6)


def test_a_disaggregated_plan_names_runnable_commands(client) -> None:
    from plena_opt.cli.main import main

    doc = client.get("/api/studies/sv-serving/serving").json()
    t = next(t for t in doc["trials"] if t["serving"] == "disaggregated")
    assert t["plan"] is None and [p["role"] for p in t["pools"]] == ["prefill", "decode"]
    assert t["label"] == f"{t['pools'][0]['workers']}P[{t['pools'][0]['label']}] " + (
        f"{t['pools'][1]['workers']}D[{t['pools'][1]['label']}]"
    )
    assert len(t["simulate_commands"]) == 2
    for cmd, pool in zip(t["simulate_commands"], t["pools"], strict=True):
        argv = shlex.split(cmd)
        assert argv[:2] == ["plena-opt", "simulate"]
        assert argv[argv.index("--devices") + 1] == str(pool["devices_per_worker"])
        assert argv[argv.index("--batch-size") + 1] == str(pool["batch_size"])
    argv = shlex.split(t["simulate_commands"][1])[1:]
    assert main([*argv, "--samples", "0", "--max-window-steps", "4", "--json"]) == 0


def test_sla_misses_are_flagged(client, store) -> None:
    doc = client.get("/api/studies/so-serving/serving").json()
    stored = {t.number: t for t in _stored(store, "so-serving").trials}
    misses = [t for t in doc["trials"] if not t["meets_sla"]]
    assert misses and any(t["meets_sla"] for t in doc["trials"])
    for t in doc["trials"]:
        meets = t["ttft_seconds"] <= 0.3 and t["tpot_seconds"] <= 0.03
        assert t["meets_sla"] is meets
        assert t["constraints"] == stored[t["number"]].user_attrs["constraints"]
        assert not (t["on_front"] and not meets)
    modes = {m["mode"]: m for m in doc["modes"]}
    assert modes["disaggregated"]["n_trials"] == 40
    assert sum(m["n_meeting_sla"] for m in doc["modes"]) == len(doc["trials"]) - len(misses)


def test_errors_and_caps(client, monkeypatch, tmp_path) -> None:
    r = client.get("/api/studies/sv-serving/front")
    assert r.status_code == 422 and r.json()["field"] == "name" and "/serving" in r.text
    r = client.get("/api/studies/sv/serving")
    assert r.status_code == 422 and r.json()["field"] == "name"
    assert client.get("/api/studies/nope/serving").status_code == 404
    r = client.get("/api/studies/" + "x" * (limits.MAX_NAME_CHARS + 1) + "/serving")
    assert r.status_code == 422 and r.json()["field"] == "name"
    monkeypatch.setattr(limits, "MAX_FRONT_TRIALS", 3)
    assert len(client.get("/api/studies/so-serving/serving").json()["trials"]) == 3
    empty = TestClient(
        create_app(storage=str(tmp_path / "absent.log")), base_url="http://127.0.0.1"
    )
    assert empty.get("/api/studies/sv-serving/serving").status_code == 404
    assert not (tmp_path / "absent.log").exists()


def test_plan_study_view_follows_the_sla(client, tmp_path) -> None:
    from plena_opt.cli.main import main

    f = client.get("/api/studies/sv/front").json()
    assert f["view"] == "per-user-per-device" and f["sla_constraints"] == ["max_ttft", "max_tpot"]
    for t in f["trials"]:
        assert t["tps_per_device"] == pytest.approx(t["tps"] / 32, rel=1e-12)
    plain = str(tmp_path / "p.log")
    argv = ["search", "--model", "llama-3.2-1b", "--noc", "illustrative_gpu_node_8", "--quiet"]
    assert main([*argv, "--recheck", "0", "--storage", plain, "--study", "plain"]) == 0
    g = (
        TestClient(create_app(storage=plain), base_url="http://127.0.0.1")
        .get("/api/studies/plain/front")
        .json()
    )
    assert g["view"] == "ttft-tps" and g["sla_constraints"] == []


needs_browser = pytest.mark.skipif(
    os.environ.get("CI") != "true" and chromium_path() is None,
    reason="chromium is not installed (apt-get install chromium)",
)


@pytest.fixture(scope="module")
def page(store):
    if os.environ.get("CI") != "true":
        pytest.importorskip("playwright")
    with running_app(store) as base, browser() as b:
        pg = b.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(base + "/?tab=sim")
        pg.wait_for_selector("body[data-ready='1']", timeout=20_000)
        pg.click("#tab-studies")
        pg.wait_for_selector("#front-svg circle.pt")
        yield pg
        assert errors == []


def _fills(pg, selector: str) -> list[str]:
    return pg.eval_on_selector_all(selector, "els => els.map(e => getComputedStyle(e).fill)")


def _open(pg, name: str) -> None:
    pg.click(f"button.study[data-study='{name}']")
    pg.wait_for_function(
        f"document.querySelector('#front h3') && "
        f"document.querySelector('#front h3').textContent.startsWith('{name} ')"
    )


@needs_browser
def test_browser_draws_modes_and_the_verdict(page, client, tmp_path) -> None:
    doc = client.get("/api/studies/sv-serving/serving").json()
    _open(page, "sv-serving")
    n = {m: sum(t["serving"] == m for t in doc["trials"]) for m in ("aggregated", "disaggregated")}
    assert page.locator("circle.pt").count() == len(doc["trials"])
    assert page.locator("circle.pt[data-mode='aggregated']").count() == n["aggregated"]
    assert page.locator("circle.pt[data-mode='disaggregated']").count() == n["disaggregated"]
    assert set(_fills(page, "circle.pt[data-mode='aggregated']")) == {AGG_FILL}
    assert set(_fills(page, "circle.pt[data-mode='disaggregated']")) == {DISAGG_FILL}
    assert page.inner_text("#serving-verdict") == doc["verdict"]
    rows = page.locator("table.serving-table[data-mode='disaggregated'] tbody tr")
    assert rows.count() == n["disaggregated"]
    assert "TPOT ms" in page.inner_text("table.serving-table[data-mode='aggregated'] thead")
    page.screenshot(path=str(tmp_path / "serving-study.png"), full_page=True)
    # a disaggregated plan says how to simulate it; the page stays on the studies tab
    page.locator("circle.pt[data-mode='disaggregated']").first.click()
    note = page.inner_text("#front-note")
    assert "disaggregated" in note and note.count("plena-opt simulate") == 2
    assert page.is_visible("#page-studies")


@needs_browser
def test_browser_greys_sla_misses(page, client) -> None:
    doc = client.get("/api/studies/so-serving/serving").json()
    _open(page, "so-serving")
    misses = sum(not t["meets_sla"] for t in doc["trials"])
    assert page.locator("circle.pt[data-meets='0']").count() == misses > 0
    assert set(_fills(page, "circle.pt[data-meets='0']")) == {GREY_FILL}
    assert set(_fills(page, "circle.pt[data-meets='1'][data-mode='aggregated']")) == {AGG_FILL}


@needs_browser
def test_browser_opens_an_aggregated_plan_as_stored(page, client) -> None:
    doc = client.get("/api/studies/sv-serving/serving").json()
    _open(page, "sv-serving")
    i = next(i for i, t in enumerate(doc["trials"]) if t["serving"] == "aggregated")
    plan = doc["trials"][i]["plan"]
    before = int(page.get_attribute("body", "data-ready") or 0)
    page.locator(f"table.serving-table tr[data-open='{i}'] a").click()
    page.wait_for_function(f"Number(document.body.dataset.ready) > {before}", timeout=30_000)
    req = page.evaluate("window.plenaUi.req.serving")
    for k in ("tp", "ep", "dp", "pp", "cp", "moe_tp_mode", "comm_overlap", "batch_size"):
        assert req[k] == plan[k], k
    page.click("#tab-studies")


@needs_browser
def test_browser_plan_study_with_sla_is_per_user_per_device(page) -> None:
    _open(page, "sv")
    titles = page.eval_on_selector_all(
        "#front-svg .axis-title", "els => els.map(e => e.textContent)"
    )
    assert titles == ["tokens/s per user (1 / TPOT, log)", "tokens/s per device (log)"]
