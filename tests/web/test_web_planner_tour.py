"""The planner as the page's front door, in a real headless Chromium (Debian's package, driven by
Playwright): the page opens on the Planner tab; the whole tour runs with no console error and
from the keyboard alone (Tab reaches every control of the form, Enter searches, opens a plan and
re-estimates it); the front is drawn while the search runs; one knob of an opened plan changes
without a new search (a bad value named with the CLI's message); a model directory, an uploaded
NoC profile and a request rate are searched. Screenshots (``ui-planner-*.png``) go to
``$PLENA_UI_SCREENSHOTS`` (``docs`` refreshes the README's), else to a temporary folder.

Under ``CI=true`` a missing Chromium or Playwright fails the tests; elsewhere they are skipped.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
from tests.web_support import browser, chromium_path, running_app  # noqa: E402

if os.environ.get("CI") != "true":
    if chromium_path() is None:
        pytest.skip("chromium is not installed (apt-get install chromium)", allow_module_level=True)
    pytest.importorskip("playwright")

WAIT_MS = 120_000
CONFIGS = Path(__file__).resolve().parents[2] / "plena_opt/models/configs"
# every control of the form a keyboard user must reach (the rows shown by default)
FORM_CONTROLS = [
    "pl-filter", "pl-model", "pl-upload", "pl-model-dir", "pl-chip", "pl-noc", "pl-noc-upload",
    "pl-devices", "pl-gpn", "pl-input", "pl-output", "pl-batches", "pl-load-kind", "pl-conc",
    "pl-engine", "pl-precision", "pl-ttft", "pl-tpot", "pl-percentile", "pl-serving", "pl-trials",
    "pl-seed",
    "pl-run",
]  # fmt: skip


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = os.environ.get("PLENA_UI_SCREENSHOTS")
    return Path(folder) if folder else tmp_path_factory.mktemp("ui-planner-tour")


@pytest.fixture(scope="module")
def url():
    with running_app(None) as base:
        yield base


@pytest.fixture(scope="module")
def b():
    with browser() as br:
        yield br


def _page(b, errors: list[str], width: int = 1400, height: int = 900):
    pg = b.new_page(viewport={"width": width, "height": height})
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: m.type == "error" and errors.append(m.text))
    return pg


def _small(pg) -> None:
    pg.select_option("#pl-chip", "h200-sxm")
    for sel, value in [("#pl-input", "1024"), ("#pl-output", "128"), ("#pl-trials", "40")]:
        pg.fill(sel, value)
    pg.select_option("#pl-serving", "aggregated")


def _search(pg) -> None:
    pg.evaluate("delete document.body.dataset.plannerState")
    pg.click("#pl-run")
    pg.wait_for_selector("body[data-planner-state='done']", timeout=WAIT_MS)


def _focus_order(pg, presses: int) -> list[str]:
    seen = []
    for _ in range(presses):
        pg.keyboard.press("Tab")
        seen.append(pg.evaluate("document.activeElement && document.activeElement.id"))
    return seen


def test_the_tour_from_the_keyboard_with_no_console_error(b, url, shots) -> None:
    errors: list[str] = []
    pg = _page(b, errors, 1280, 800)
    pg.goto(url + "/")  # no tab named: the planner is the front door
    pg.wait_for_selector("body[data-planner-ready='1']", timeout=WAIT_MS)
    assert pg.is_visible("#page-planner") and not pg.is_visible("#page-sim")
    assert pg.get_attribute("#tab-planner", "aria-selected") == "true"
    pg.screenshot(path=str(shots / "ui-planner-first-screen.png"))
    pg.focus("#tab-studies")
    order = _focus_order(pg, 60)
    missing = [c for c in FORM_CONTROLS if c not in order]
    assert missing == [], (missing, order)
    assert order.index("pl-filter") < order.index("pl-chip") < order.index("pl-run")
    _small(pg)
    pg.fill("#pl-tpot", "5")
    pg.focus("#pl-run")
    pg.keyboard.press("Enter")  # search from the keyboard
    pg.wait_for_selector("body[data-planner-state='done']", timeout=WAIT_MS)
    pg.focus("#pl-table tbody tr[data-mode='aggregated']")
    key = pg.evaluate("document.activeElement.dataset.key")
    pg.keyboard.press("Enter")  # a focused row opens its plan
    pg.wait_for_function(f"document.body.dataset.planOpen === {json.dumps(key)}", timeout=WAIT_MS)
    pg.focus("#pl-k-batch")
    pg.keyboard.press("Control+A")
    pg.keyboard.type("64")
    pg.keyboard.press("Enter")  # the knob form submits from the keyboard
    pg.wait_for_selector("#pl-knob-table", timeout=WAIT_MS)
    for tab in ("#tab-sim", "#tab-studies", "#tab-planner"):
        pg.focus(tab)
        pg.keyboard.press("Enter")
    pg.wait_for_selector("body[data-ready='1']", timeout=WAIT_MS)  # the simulator ran once shown
    assert pg.is_visible("#page-planner")
    pg.close()
    assert errors == []


def test_the_front_is_drawn_as_it_grows(b, url, shots) -> None:
    errors: list[str] = []
    pg = _page(b, errors)
    pg.goto(url + "/")
    pg.wait_for_selector("body[data-planner-ready='1']", timeout=WAIT_MS)
    pg.select_option("#pl-noc", "h200x32")
    pg.select_option("#pl-serving", "aggregated")
    pg.fill("#pl-batches", ",".join(str(b) for b in range(1, 65)))  # 7,168 plans: seconds
    pg.fill("#pl-trials", "20000")
    pg.click("#pl-run")
    pg.wait_for_selector("body[data-live-front]", timeout=WAIT_MS)
    live = pg.evaluate("window.plenaPlanner.live")  # taken as the running job's front was drawn
    assert live["state"] == "running" and live["drawn"] == live["front"] > 0
    if pg.evaluate("window.plenaPlanner.view.state") == "running":
        assert "The front so far" in pg.text_content("#pl-live")
        pg.evaluate("window.scrollTo(0, 0)")
        pg.screenshot(path=str(shots / "ui-planner-live.png"))
        pg.click("#pl-cancel")
    pg.wait_for_function("document.body.dataset.plannerState", timeout=WAIT_MS)
    pg.close()
    assert errors == []


def test_one_knob_changes_without_a_new_search(b, url, shots) -> None:
    errors: list[str] = []
    pg = _page(b, errors)
    pg.goto(url + "/")
    pg.wait_for_selector("body[data-planner-ready='1']", timeout=WAIT_MS)
    _small(pg)
    _search(pg)
    job = pg.evaluate("window.plenaPlanner.job")
    key = pg.get_attribute("#pl-table tbody tr[data-mode='aggregated']", "data-key")
    pg.click(f"#pl-table tbody tr[data-key='{key}']")
    pg.wait_for_selector("#pl-knobs")
    pg.fill("#pl-k-tp", "16")
    pg.click("#pl-k-run")
    pg.wait_for_function("document.getElementById('pl-knob-error').textContent !== ''")
    assert pg.get_attribute("#pl-knob-error", "data-field") == "tp"
    assert "the plan uses 16 devices but NoC profile 'hgx-h200x8' has 8" in pg.text_content(
        "#pl-knob-error"
    )
    pg.fill("#pl-k-tp", pg.get_attribute("#pl-k-tp", "data-was"))
    pg.select_option("#pl-k-precision", "fp8")
    pg.click("#pl-k-run")
    pg.wait_for_selector("#pl-knob-table")
    assert pg.evaluate("document.body.dataset.reestimated").endswith("-fp8")
    assert pg.evaluate("window.plenaPlanner.job") == job  # no new search
    assert pg.query_selector_all("#pl-knob-table td.changed")
    pg.screenshot(path=str(shots / "ui-planner-knobs.png"), full_page=True)
    pg.close()
    assert [e for e in errors if "status of 422" not in e] == []  # the refused re-estimate


def test_a_model_directory_a_noc_upload_and_a_request_rate(b, url, tmp_path, shots) -> None:
    from deepstack.presets import switch_noc

    folder = tmp_path / "My-Llama-3.2-1B"
    folder.mkdir()
    shutil.copy(CONFIGS / "llama-3.2-1b.json", folder / "config.json")
    noc = tmp_path / "my-switch-16.json"
    noc.write_text(json.dumps(switch_noc(16).to_dict()))
    errors: list[str] = []
    pg = _page(b, errors)
    pg.goto(url + "/")
    pg.wait_for_selector("body[data-planner-ready='1']", timeout=WAIT_MS)
    _small(pg)
    pg.fill("#pl-model-dir", str(tmp_path / "nowhere"))
    pg.click("#pl-run")
    pg.wait_for_function("document.getElementById('pl-error').textContent !== ''")
    assert pg.get_attribute("#pl-error", "data-field") == "model_dir"
    pg.fill("#pl-model-dir", str(folder))
    assert pg.is_disabled("#pl-model")  # the directory is searched, not the catalog model
    pg.set_input_files("#pl-noc-upload", str(noc))
    pg.wait_for_function("document.getElementById('pl-noc-upload-name').textContent !== ''")
    pg.select_option("#pl-load-kind", "rate")
    pg.fill("#pl-rate", "2")
    _search(pg)
    command = pg.text_content("#pl-command")
    assert f"--model-path {folder}" in command and "--noc noc.json" in command
    assert "save it beside you" in pg.text_content("#pl-noc-note")
    pg.click("#pl-table tbody tr[data-mode='aggregated']")
    pg.wait_for_selector("#pl-load")
    assert "2 requests/s" in pg.text_content("#pl-detail")
    pg.screenshot(path=str(shots / "ui-planner-inputs.png"), full_page=True)
    pg.close()
    assert [e for e in errors if "status of 422" not in e] == []
