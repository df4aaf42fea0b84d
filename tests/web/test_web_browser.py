"""The web UI in a real headless Chromium (Debian's package, driven by Playwright): the first
screen's run, a bigmac-vpp run, hover, selection and its explanation, schedule-specific duration
inputs, the trace download and the studies tab. Op and wait counts are checked against the API.

Under ``CI=true`` a missing Chromium or Playwright fails the tests; elsewhere they are skipped.
"""

from __future__ import annotations

import json
import os

import httpx
import pytest

from plena_opt.simulator import validate_trace

pytest.importorskip("fastapi")
from tests.web_support import browser, chromium_path, running_app  # noqa: E402

if os.environ.get("CI") != "true":
    if chromium_path() is None:
        pytest.skip("chromium is not installed (apt-get install chromium)", allow_module_level=True)
    pytest.importorskip("playwright")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    from plena_opt.cli.main import main

    path = tmp_path_factory.mktemp("store") / "s.log"
    argv = ["search", "--model", "gpt-oss-20b", "--noc", "illustrative_gpu_node_8"]
    argv += ["--input-seq", "256", "--output-seq", "8", "--quiet", "--recheck", "0"]
    argv += ["--storage", str(path), "--study", "ui", "--max-ttft-ms", "150"]
    assert main(argv) == 0
    return str(path)


@pytest.fixture(scope="module")
def url(store):
    with running_app(store) as base:
        yield base


@pytest.fixture(scope="module")
def page(url):
    with browser() as b:
        pg = b.new_page(viewport={"width": 1400, "height": 900}, accept_downloads=True)
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(url + "/?tab=sim")
        pg.wait_for_selector("body[data-ready='1']", timeout=20_000)
        yield pg
        assert errors == []


def _runs(pg) -> int:
    return int(pg.get_attribute("body", "data-ready") or 0)


def _run(pg) -> None:
    before = _runs(pg)
    pg.click("#run")
    pg.wait_for_function(f"Number(document.body.dataset.ready) > {before}", timeout=20_000)


def _api_result(url: str, pg) -> dict:
    req = pg.evaluate("window.plenaUi.req")
    r = httpx.post(url + "/api/simulate", json=req, timeout=30)
    assert r.status_code == 200
    return r.json()


def _drawn(pg) -> tuple[list[str], list[str]]:
    ops = pg.eval_on_selector_all("[data-op]", "els => els.map(e => e.dataset.op)")
    waits = pg.eval_on_selector_all("[data-wait]", "els => els.map(e => e.dataset.wait)")
    return ops, waits


def _check_counts(url: str, pg) -> dict:
    doc = _api_result(url, pg)
    ops, waits = _drawn(pg)
    det = doc["timelines"]["deterministic"]
    assert sorted(ops) == sorted(doc["ops"]["name"])  # the fitted view draws every op
    waited = [
        n for j, n in enumerate(doc["ops"]["name"]) if det["start"][j] > det["rank_free_at"][j]
    ]
    assert len(waits) == det["n_waits"] == len(waited) > 0
    assert sorted(waits) == sorted(waited)
    return doc


def test_first_screen_runs_1f1b(url, page) -> None:
    types = page.eval_on_selector_all("[data-op-type]", "els => els.map(e => e.dataset.opType)")
    assert types == ["F", "B"]
    doc = _check_counts(url, page)
    assert doc["n_ops"] == 64 and doc["timelines"]["deterministic"]["makespan"] == 33.0
    assert page.inner_text("#makespan") == "33"
    assert "makespan" in page.inner_text("#quantiles")


def test_schedule_change_changes_the_inputs(page) -> None:
    def types() -> list[str]:
        return page.eval_on_selector_all("[data-op-type]", "els => els.map(e => e.dataset.opType)")

    page.select_option("#schedule", "zb-h1")
    assert types() == ["F", "I", "W"]
    page.select_option("#schedule", "bigmac-vpp")
    assert types() == ["F", "B", "VF", "VB", "GF", "GB"]
    page.check("#simulate-comm")
    assert types() == ["F", "B", "VF", "VB", "GF", "GB", "XF", "XB"]
    page.uncheck("#simulate-comm")
    page.select_option("#schedule", "1f1b")
    assert types() == ["F", "B"]


def test_bigmac_vpp_hover_select_and_jump(url, page) -> None:
    page.select_option("#schedule", "bigmac-vpp")
    page.fill("#pp", "4")
    page.fill("#vpp", "2")
    page.fill("#microbatches", "8")
    _run(page)
    doc = _check_counts(url, page)
    assert doc["vpp"] == 2 and doc["pp"] == 4
    # hover: the card shows the op and its times
    op = page.locator("[data-op='rank0/F/chunk_b/mb0']")
    op.hover()
    tip = page.inner_text("#tooltip")
    assert "F0-C1" in tip and "rank 0" in tip and "wait" in tip and "duration" in tip
    # select an op that waited: the explanation names the binding dependency and its reason
    names = doc["ops"]["name"]
    det = doc["timelines"]["deterministic"]
    j = next(
        k
        for k, n in enumerate(names)
        if det["start"][k] > det["rank_free_at"][k] and doc["ops"]["deps"][k]
    )
    page.locator(f"[data-op='{names[j]}']").click(force=True)
    why = page.inner_text("#why")
    src, reason = doc["ops"]["deps"][j][det["binding"][j]]
    wait = det["start"][j] - det["rank_free_at"][j]
    assert why.startswith("Waited ") and f"for {doc['ops']['label'][src]} on rank" in why
    assert doc["ops"]["reason_text"][doc["ops"]["reasons"][reason]] in why
    assert f"{wait:g}"[:3] in why
    rows = page.locator("#explain table.deps tbody tr").count()
    assert rows == len(doc["ops"]["deps"][j])
    page.click("#why a.jump")
    assert page.evaluate("window.plenaUi.selected") == src
    assert page.locator(f"[data-op='{names[src]}'].sel").count() == 1


def test_trace_download_is_valid(page, tmp_path) -> None:
    with page.expect_download() as info:
        page.click("#dl-trace")
    path = tmp_path / "trace.json"
    info.value.save_as(path)
    trace = json.loads(path.read_text())
    assert validate_trace(trace) == []
    names = {e["name"] for e in trace["traceEvents"] if e["ph"] == "X"}
    drawn, _ = _drawn(page)
    assert set(drawn) <= names
    with page.expect_download() as info:
        page.click("#dl-json")
    doc = json.loads(open(info.value.path()).read())
    assert doc["n_ops"] == len(drawn)


def test_monte_carlo_samples_switch(page) -> None:
    page.click("#sample-switch button[data-sample='p99']")
    assert "p99" in page.inner_text("#summary")
    page.click("#sample-switch button[data-sample='deterministic']")


def test_bad_input_shows_the_field(page) -> None:
    page.fill("#pp", "0")
    failed = int(page.get_attribute("body", "data-failed") or 0)
    page.click("#run")
    page.wait_for_function(f"Number(document.body.dataset.failed || 0) > {failed}")
    assert page.inner_text("#error").startswith("training.pp")
    page.fill("#pp", "4")


def test_studies_tab_opens_a_plan(page) -> None:
    page.click("#tab-studies")
    page.wait_for_selector("#front-svg circle.pt")
    assert page.locator("circle.pt.infeasible").count() > 0
    assert page.locator("circle.pt.front").count() > 0
    before = _runs(page)
    page.locator("circle.pt.front").first.click()
    page.wait_for_function(f"Number(document.body.dataset.ready) > {before}", timeout=30_000)
    assert page.is_visible("#page-sim")
    assert page.evaluate("window.plenaUi.res.mode") == "serving"
    types = page.eval_on_selector_all("[data-op-type]", "els => els.map(e => e.dataset.opType)")
    assert "P_s0" in types and "XD" in types
    assert page.locator("[data-op]").count() > 0


def test_keyboard_zoom_and_pan(page) -> None:
    page.click("#tab-sim")
    page.focus("#timeline .tl-view")
    px = page.evaluate("window.plenaUi.timeline.px")
    page.keyboard.press("+")
    page.wait_for_function(f"window.plenaUi.timeline.px > {px}")
    t0 = page.evaluate("window.plenaUi.timeline.t0")
    page.keyboard.press("ArrowRight")
    page.wait_for_function(f"window.plenaUi.timeline.t0 > {t0}")
    page.keyboard.press("0")
    assert page.evaluate("window.plenaUi.timeline.px") == pytest.approx(px)
