"""The planner form's serving options in a real headless Chromium (issue 23): the "more serving
options" controls (range ratio, engine version, MoE routing, KV precision, EPLB, speculative K,
method, acceptance) reach the job as the API fields of the same names, the opened plan shows the
range ratio and the speculative verdict the API gives, and a reload restores them from the URL.
Screenshots go to ``$PLENA_UI_SCREENSHOTS`` (else a temporary folder)."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")
from tests.web_support import (  # noqa: E402
    PLANNER_WAIT_MS,
    browser,
    chromium_path,
    fill_planner,
    open_planner,
    running_app,
)

if os.environ.get("CI") != "true":
    if chromium_path() is None:
        pytest.skip("chromium is not installed (apt-get install chromium)", allow_module_level=True)
    pytest.importorskip("playwright")

# an aggregated llama-3.1-8b search of 1024 / 128 tokens (chip, NoC, trials, batches per test)
LLAMA_8B = {"#pl-model": "llama-3.1-8b", "#pl-serving": "aggregated"}
SHORT = {"#pl-input": "1024", "#pl-output": "128"}


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = os.environ.get("PLENA_UI_SCREENSHOTS")
    return Path(folder) if folder else tmp_path_factory.mktemp("ui-planner-options")


def test_the_more_options_reach_the_job_and_the_plan_view(shots) -> None:
    errors: list[str] = []
    with running_app(None) as url, browser() as b:
        pg = open_planner(b, url, errors)
        fill_planner(
            pg,
            {**LLAMA_8B, "#pl-chip": "h200-sxm", "#pl-noc": "hgx-h200x8"},
            {**SHORT, "#pl-trials": "40", "#pl-devices": "2", "#pl-batches": "16"},
        )
        assert pg.get_attribute("#pl-engine-version", "placeholder") == "0.34.0"
        pg.click("#pl-more > summary")
        pg.fill("#pl-range", "0.5")
        pg.fill("#pl-engine-version", "0.34.0")
        pg.select_option("#pl-kv-precision", "fp8")
        pg.fill("#pl-spec-k", "2")
        pg.select_option("#pl-spec-method", "eagle")
        pg.fill("#pl-acceptance", "0.8,0.6")
        pg.screenshot(path=str(shots / "ui-planner-options-form.png"), full_page=True)
        pg.click("#pl-run")
        pg.wait_for_selector("body[data-planner-state='done']", timeout=PLANNER_WAIT_MS)
        job = pg.evaluate("window.plenaPlanner.job")
        v = httpx.get(f"{url}/api/planner/jobs/{job}").json()
        f = v["fields"]
        assert f["range_ratio"] == 0.5 and f["engine_version"] == "0.34.0"
        assert f["kv_precision"] == "fp8" and "routing" not in f  # balanced: the default
        assert f["speculative"] == 2 and f["speculative_method"] == "eagle"
        assert f["acceptance"] == [0.8, 0.6] and "--kv-precision fp8" in v["command"]
        key = pg.get_attribute("#pl-table tbody tr[data-mode='aggregated']", "data-key")
        pg.click(f"#pl-table tbody tr[data-key='{key}']")
        pg.wait_for_selector("#pl-spec", timeout=PLANNER_WAIT_MS)
        api = httpx.get(f"{url}/api/planner/jobs/{job}/plan", params={"key": key}).json()
        u = api["pools"][0]["under_load"]
        s = u["speculative"]
        text = pg.text_content("#pl-spec")
        assert "eagle K=2" in text and "acceptance 0.8/0.6" in text
        assert f"{s['tpot_with_ms']:.2f} ms with" in text
        assert "lengths ±0.5" in pg.text_content("#pl-detail")
        pg.screenshot(path=str(shots / "ui-planner-options-plan.png"), full_page=True)
        pg.reload()  # the URL holds the form: the options come back
        pg.wait_for_selector("body[data-planner-ready='1']", timeout=PLANNER_WAIT_MS)
        assert pg.input_value("#pl-range") == "0.5" and pg.input_value("#pl-spec-k") == "2"
        assert pg.input_value("#pl-kv-precision") == "fp8"
        assert pg.input_value("#pl-acceptance") == "0.8,0.6"
        assert pg.evaluate("document.getElementById('pl-more').open")
    assert errors == []


def test_the_analytic_knobs_reach_a_plena_search(shots) -> None:
    errors: list[str] = []
    with running_app(None) as url, browser() as b:
        pg = open_planner(b, url, errors, console=False)
        fill_planner(
            pg,
            {**LLAMA_8B, "#pl-chip": "plena-default", "#pl-noc": "single_device"},
            {**SHORT, "#pl-trials": "8", "#pl-batches": "4"},
        )
        pg.click("#pl-more > summary")
        assert pg.input_value("#pl-overlap") == "stage-roofline"  # the CLI's default
        pg.check("#pl-lm-head")
        pg.select_option("#pl-overlap", "serial")
        pg.fill("#pl-freq", "2e9")
        pg.click("#pl-run")
        pg.wait_for_selector("body[data-planner-state='done']", timeout=PLANNER_WAIT_MS)
        v = httpx.get(f"{url}/api/planner/jobs/{pg.evaluate('window.plenaPlanner.job')}").json()
        f = v["fields"]
        assert f["include_lm_head"] is True and f["overlap"] == "serial"
        assert f["frequency_hz"] == 2e9
        assert "--include-lm-head --overlap serial --frequency-hz 2000000000.0" in v["command"]
        pg.screenshot(path=str(shots / "ui-planner-options-plena.png"), full_page=True)
    assert errors == []
