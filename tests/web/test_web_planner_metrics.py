"""The planner page builds its front table's metric columns from the registry (issue 27 item 4):
in a real headless Chromium (Debian's package, driven by Playwright), each heading, unit and
hover text is the declaration ``GET /api/metrics`` serves (a description and a label changed in
``plena_opt.metrics`` show up on the page unedited), and a search under load has the E2E column,
each cell the point's ``figures.e2e_seconds`` in the declared display unit (and the plan view
the same figure). The screenshot
(``ui-planner-metrics.png``, 1280 px wide) goes to ``$PLENA_UI_SCREENSHOTS`` or a temporary
folder.

Under ``CI=true`` a missing Chromium or Playwright fails the browser test; elsewhere it skips."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")
from plena_opt import metrics  # noqa: E402
from tests.web_support import browser, chromium_path, running_app  # noqa: E402

WAIT_MS = 120_000
# the table's metric columns, in order (planplot.js's TABLE_METRICS); E2E only under load
COLUMNS = ["tps_per_device", "tps_per_sequence", "ttft_seconds", "tpot_seconds", "e2e_seconds",
           "usd_per_million_output_tokens"]  # fmt: skip
PATCHED = "mean request latency, patched in the registry"


def _patched() -> tuple[metrics.Metric, ...]:
    """The registry with E2E's description and TPOT's label changed."""
    out = []
    for m in metrics.METRICS:
        if m.name == "e2e_seconds":
            m = dataclasses.replace(m, description=PATCHED)
        if m.name == "tpot_seconds":
            m = dataclasses.replace(m, label="TPOT*")
        out.append(m)
    return tuple(out)


def _tooltip(m: dict) -> str:
    """metrics.js's ``tooltip``."""
    better = "lower is better" if m["direction"] == "minimize" else "higher is better"
    iv = "; (low–high): the measured-error interval" if m["interval"] else ""
    return f"{m['description']} ({m['display_unit']}; {better}{iv})"


@pytest.mark.skipif(
    os.environ.get("CI") != "true" and chromium_path() is None, reason="chromium not installed"
)
def test_the_front_tables_columns_come_from_the_registry(monkeypatch, tmp_path_factory) -> None:
    pytest.importorskip("playwright")
    monkeypatch.setattr(metrics, "METRICS", _patched())
    folder = os.environ.get("PLENA_UI_SCREENSHOTS")
    shots = Path(folder) if folder else tmp_path_factory.mktemp("ui-metrics")
    errors: list[str] = []
    with running_app(None) as url, browser() as b:
        declared = {m["name"]: m for m in httpx.get(f"{url}/api/metrics").json()}
        assert declared["e2e_seconds"]["description"] == PATCHED
        pg = b.new_page(viewport={"width": 1280, "height": 900})
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.on("console", lambda m: m.type == "error" and errors.append(m.text))
        pg.goto(url + "/?tab=planner")
        pg.wait_for_selector("body[data-planner-ready='1']", timeout=WAIT_MS)
        pg.select_option("#pl-model", "llama-3.1-8b")
        pg.select_option("#pl-chip", "h100-sxm")
        pg.select_option("#pl-noc", "hgx-h100x8")
        pg.select_option("#pl-serving", "aggregated")
        pg.select_option("#pl-engine", "vllm")
        pg.select_option("#pl-percentile", "p90")
        fields = [("#pl-input", "1024"), ("#pl-output", "256"), ("#pl-trials", "40"),
                  ("#pl-batches", "4,16,64"), ("#pl-conc", "16"), ("#pl-ttft", "2000")]  # fmt: skip
        for sel, value in fields:
            pg.fill(sel, value)
        pg.click("#pl-run")
        pg.wait_for_selector("body[data-planner-state='done']", timeout=WAIT_MS)
        pg.wait_for_selector("#pl-table tbody tr", timeout=WAIT_MS)
        heads = pg.eval_on_selector_all(
            "#pl-table thead th[data-metric]",
            "hs => hs.map(h => [h.dataset.metric, h.textContent, h.title])",
        )
        assert [h[0] for h in heads] == COLUMNS
        for name, text, title in heads:
            m = declared[name]
            at = " p90" if m["percentile"] else ""
            assert text == f"{m['label']}{at} {m['display_unit']}", text
            assert title == _tooltip(m)
        assert dict((h[0], h[1]) for h in heads)["tpot_seconds"] == "TPOT* p90 ms"
        assert PATCHED in dict((h[0], h[2]) for h in heads)["e2e_seconds"]
        job = pg.evaluate("window.plenaPlanner.job")
        v = httpx.get(f"{url}/api/planner/jobs/{job}").json()
        pts = [p for p in v["answer"]["points"] if p["feasible"]]
        assert pts
        for p in pts:
            e2e = p["figures"]["e2e_seconds"]
            assert e2e > p["figures"]["ttft_seconds"]  # TTFT + (output − 1)·TPOT
            cell = pg.text_content(
                f"#pl-table tr[data-key='{p['key']}'] td[data-metric='e2e_seconds']"
            )
            assert cell == f"{e2e * 1e3:.2f}"
        pg.screenshot(path=str(shots / "ui-planner-metrics.png"), full_page=True)
        p = pts[0]  # the plan view names E2E as the registry declares it
        pg.click(f"#pl-table tbody tr[data-key='{p['key']}']")
        pg.wait_for_selector("#pl-detail-e2e", timeout=WAIT_MS)
        e2e = pg.text_content("#pl-detail-e2e")
        assert e2e == f"E2E {p['figures']['e2e_seconds'] * 1e3:.2f} ms"
        assert pg.get_attribute("#pl-detail-e2e", "title") == _tooltip(declared["e2e_seconds"])
        pg.screenshot(path=str(shots / "ui-planner-metrics-plan.png"), full_page=False)
        wide = "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        assert pg.evaluate(wide) <= 0  # nothing pushes the 1280 px page sideways
        pg.close()
    assert errors == []
