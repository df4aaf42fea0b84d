"""The planner tab's speed in headless Chromium (issue 28).

Run: ``.venv/bin/python benchmarks/bench_ui_planner.py [--json]``. Needs the ``ui`` extra,
Playwright and Debian's ``chromium``; the app runs in this process on a free loopback port.

* Search → front drawn: Llama-3.1-70B on one HGX H200 node (``hgx-h200x8``, 8 GPUs), 2,048 in /
  1,024 out, serving ``both``, 200 trials, no SLA: click on Search → the answer's plot in the page
  (job start, polled progress, search, serving comparison, recommendation, JSON, DOM), from
  ``performance.now()``; the front is drawn once the job ends, so this is also the search's
  wall time as the page sees it. Median of 3 runs, each a new job.
  The first front point is drawn earlier, while the search runs (the progress carries the front
  so far): click on Search → the first point in the page.
* Input latency while a search runs: a long search (llama-3.1-8b on ``h200x32``, batch sizes 1 to
  64, 7,168 plans) runs on the server while the page polls it; 40 times, a value is typed
  into a form field and the time to the next animation frame is taken. Median and maximum.
* The same on 4,096 devices: a switch NoC profile built as ``bench_scale.switch_profile(4096)``
  builds it (8-GPU nodes, pods of 32 nodes, one top switch) is uploaded through the form's NoC
  file input; Llama-3.1-70B, 12 batch sizes (thousands of plans). Also: the first front point
  drawn, and the 1-minute load average before and after (``os.getloadavg``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from web_support import browser, running_app  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import switch_profile  # noqa: E402

BATCHES = "1,2,4,8,16,32,64,128,256,512,1024,2048"

LATENCY_JS = """async (n) => {
  const x = document.getElementById('pl-seed'); const out = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    x.value = String(i); x.dispatchEvent(new Event('input', { bubbles: true }));
    await new Promise((r) => requestAnimationFrame(() => r()));
    out.push(performance.now() - t0);
    await new Promise((r) => setTimeout(r, 50));
  }
  return out;
}"""


def _search(pg, model: str, noc: str, extra: dict[str, str]) -> None:
    pg.select_option("#pl-model", model)
    pg.select_option("#pl-chip", "h200-sxm")
    pg.select_option("#pl-noc", noc)
    for sel, value in extra.items():
        pg.fill(sel, value)
    pg.evaluate("window.plenaPlanner.firstDrawnAt = undefined")
    pg.evaluate("window.plenaPlanner.firstPointAt = undefined")
    pg.evaluate("delete document.body.dataset.plannerState")
    pg.click("#pl-run")


def measure(url: str) -> dict:
    with browser() as b:
        pg = b.new_page(viewport={"width": 1400, "height": 900})
        pg.goto(url + "/?tab=planner")
        pg.wait_for_selector("body[data-planner-ready='1']", timeout=60_000)
        drawn, first = [], []
        for _ in range(3):
            lengths = {
                "#pl-input": "2048",
                "#pl-output": "1024",
                "#pl-ttft": "",
                "#pl-trials": "200",
            }
            _search(pg, "llama-3.1-70b", "hgx-h200x8", lengths)
            pg.wait_for_function("window.plenaPlanner.firstDrawnAt !== undefined", timeout=120_000)
            drawn.append(pg.evaluate("window.plenaPlanner.firstDrawnAt"))
            live = pg.evaluate("window.plenaPlanner.firstPointAt")
            first.append(drawn[-1] if live is None else min(live, drawn[-1]))
        long = {"#pl-batches": ",".join(str(b) for b in range(1, 65)), "#pl-trials": "20000"}
        pg.select_option("#pl-serving", "aggregated")
        _search(pg, "llama-3.1-8b", "h200x32", long)
        pg.wait_for_function("Number(document.getElementById('pl-scored')?.textContent) > 0")
        lat = pg.evaluate(LATENCY_JS, 40)
        still = pg.evaluate("window.plenaPlanner.view.state")
        if pg.evaluate("window.plenaPlanner.view.state") == "running":
            pg.click("#pl-cancel")
        pg.wait_for_selector("body[data-planner-state]", timeout=120_000)
        return {
            "search_to_front_ms": drawn,
            "search_to_front_median_ms": statistics.median(drawn),
            "search_to_first_point_ms": first,
            "search_to_first_point_median_ms": statistics.median(first),
            "input_latency_median_ms": statistics.median(lat),
            "input_latency_max_ms": max(lat),
            "search_running_during_latency": still == "running",
            **measure_4096(pg),
        }


def measure_4096(pg) -> dict:
    """Input latency while a 4,096-device search runs (the NoC profile uploaded by the form)."""
    doc = switch_profile(4096).to_dict()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "switch-4096.json"
        path.write_text(json.dumps(doc))
        pg.set_input_files("#pl-noc-upload", str(path))
        pg.wait_for_function("document.getElementById('pl-noc-upload-name').textContent !== ''")
    load_before = os.getloadavg()[0]
    _search(pg, "llama-3.1-70b", "hgx-h200x8", {"#pl-batches": BATCHES, "#pl-trials": "20000"})
    pg.wait_for_function("Number(document.getElementById('pl-scored')?.textContent) > 0")
    lat = pg.evaluate(LATENCY_JS, 40)
    view = pg.evaluate("window.plenaPlanner.view")
    pg.wait_for_selector("body[data-planner-state='done']", timeout=600_000)
    end = pg.evaluate("window.plenaPlanner.view")
    return {
        "devices_4096_input_latency_median_ms": statistics.median(lat),
        "devices_4096_input_latency_max_ms": max(lat),
        "devices_4096_search_running_during_latency": view["state"] == "running",
        "devices_4096_first_point_ms": pg.evaluate("window.plenaPlanner.firstPointAt"),
        "devices_4096_search_s": end["elapsed_s"],
        "devices_4096_plans": end["answer"]["summary"]["evaluated"],
        "devices_4096_largest_plan_devices": max(p["devices"] for p in end["answer"]["points"]),
        "load_average_1min_before": load_before,
        "load_average_1min_after": os.getloadavg()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with running_app(None) as url:
        out = measure(url)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"Search → front drawn (70B, 8×H200): median {out['search_to_front_median_ms']:.0f} ms")
    print(f"  runs: {', '.join(f'{t:.0f}' for t in out['search_to_front_ms'])} ms")
    print(f"  first front point drawn: median {out['search_to_first_point_median_ms']:.0f} ms")
    print(
        f"input → next frame during a search: median {out['input_latency_median_ms']:.1f} ms, "
        f"max {out['input_latency_max_ms']:.1f} ms (search still running: "
        f"{out['search_running_during_latency']})"
    )
    print(
        f"4,096 devices: input → next frame median "
        f"{out['devices_4096_input_latency_median_ms']:.1f} ms, max "
        f"{out['devices_4096_input_latency_max_ms']:.1f} ms (running: "
        f"{out['devices_4096_search_running_during_latency']}); {out['devices_4096_plans']} "
        f"plans in {out['devices_4096_search_s']:.1f} s; load average "
        f"{out['load_average_1min_before']:.2f} → {out['load_average_1min_after']:.2f}"
    )


if __name__ == "__main__":
    main()
