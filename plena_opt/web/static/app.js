// plena-opt ui: wires the form, the timeline, the panels and the studies tab.

import { api, download } from "./api.js";
import { SimForm } from "./form.js";
import { explain, hoverCard, monteCarlo, summary } from "./panels.js";
import { initPlanner } from "./planner.js";
import { showStudies } from "./studies.js";
import { Timeline } from "./timeline.js";

const $ = (id) => document.getElementById(id);
const state = { res: null, req: null, sample: "deterministic", selected: -1 };
window.plenaUi = state; // for tests and benchmarks: the shown result and timeline

function status(text) {
  $("status").textContent = text;
}

const timeline = new Timeline($("timeline"), {
  onHover(j, ev, isWait) {
    const tip = $("tooltip");
    if (j < 0 || !state.res) {
      tip.hidden = true;
      return;
    }
    tip.innerHTML = hoverCard(state.res.ops, current(), j, isWait);
    tip.hidden = false;
    const box = $("timeline").getBoundingClientRect();
    const x = Math.min(ev.clientX - box.left + 14, box.width - 330);
    tip.style.left = `${x}px`;
    tip.style.top = `${ev.clientY - box.top + 46}px`;
  },
  onSelect: select,
});
state.timeline = timeline;

function current() {
  return state.res.timelines[state.sample];
}

function select(j) {
  state.selected = j;
  timeline.select(j);
  $("explain").innerHTML = explain(state.res.ops, current(), j);
  for (const a of $("explain").querySelectorAll("a.jump")) {
    a.addEventListener("click", (ev) => {
      ev.preventDefault();
      const src = +a.dataset.jump;
      timeline.reveal(src);
      select(src);
    });
  }
}

function show(sample) {
  state.sample = sample;
  const tl = current();
  timeline.setData(state.res.ops, tl);
  $("legend").innerHTML = timeline.legend;
  $("summary").innerHTML = summary(state.res, tl);
  $("mc").innerHTML = monteCarlo(state.res, tl);
  for (const b of $("sample-switch").querySelectorAll("button")) {
    b.classList.toggle("active", b.dataset.sample === sample);
    b.setAttribute("aria-checked", b.dataset.sample === sample);
  }
  if (state.selected >= 0) select(state.selected);
}

async function run(req) {
  $("error").textContent = "";
  $("run").disabled = true;
  status("simulating…");
  const t0 = performance.now();
  try {
    const res = await api.simulate(req);
    state.res = res;
    state.req = req;
    state.selected = -1;
    $("explain").innerHTML = `<p class="muted">Select an op to see why it started when it did.</p>`;
    $("sample-switch").innerHTML = Object.keys(res.timelines)
      .map((k) => `<button type="button" role="radio" data-sample="${k}">${k}</button>`)
      .join("");
    for (const b of $("sample-switch").querySelectorAll("button")) {
      b.addEventListener("click", () => show(b.dataset.sample));
    }
    show("deterministic");
    await new Promise((r) => requestAnimationFrame(() => r()));
    state.drawnMs = performance.now() - t0;
    status(`${res.n_ops} ops drawn in ${state.drawnMs.toFixed(0)} ms`);
    if (state.firstDrawnAt === undefined) state.firstDrawnAt = performance.now();
    document.body.dataset.ready = String((+document.body.dataset.ready || 0) + 1);
  } catch (err) {
    $("error").textContent = `${err.field ? err.field + ": " : ""}${err.message}`;
    $("error").dataset.field = err.field || "";
    status("");
    document.body.dataset.failed = String((+document.body.dataset.failed || 0) + 1);
  } finally {
    $("run").disabled = false;
  }
}

async function main() {
  const catalog = await api.catalog();
  const form = new SimForm(catalog, run);
  state.form = form;
  $("crit").addEventListener("change", () => timeline.setCritical($("crit").checked));
  $("fit").addEventListener("click", () => timeline.fit());
  $("zoom-in").addEventListener("click", () => timeline.zoom(2));
  $("zoom-out").addEventListener("click", () => timeline.zoom(0.5));
  $("dl-json").addEventListener("click", () => state.res && download(`plena-opt-${state.res.mode}-result.json`, state.res));
  $("dl-trace").addEventListener("click", async () => {
    if (!state.req) return;
    const trace = await api.trace({ ...state.req, sample: state.sample });
    state.lastTrace = trace;
    download(`plena-opt-${state.res.mode}-${state.sample}.json`, trace);
  });
  let studiesLoaded = false;
  let simulated = false; // the simulator's first run waits until its tab is first shown
  for (const b of document.querySelectorAll("button.tab")) {
    b.addEventListener("click", () => {
      for (const x of document.querySelectorAll("button.tab")) x.classList.toggle("active", x === b);
      const q = new URLSearchParams(location.search); // a reload comes back to this tab
      q.set("tab", b.dataset.tab);
      history.replaceState(null, "", `${location.pathname}?${q}`);
      $("page-sim").hidden = b.dataset.tab !== "sim";
      $("page-studies").hidden = b.dataset.tab !== "studies";
      $("page-planner").hidden = b.dataset.tab !== "planner";
      for (const x of document.querySelectorAll("button.tab")) x.setAttribute("aria-selected", x === b);
      if (b.dataset.tab === "sim" && !simulated) {
        simulated = true;
        if (!state.res && !state.pending) run(form.request());
      }
      if (b.dataset.tab === "studies" && !studiesLoaded) {
        studiesLoaded = true;
        showStudies(async (problem, plan) => {
          $("tab-sim").click();
          await form.loadServing(problem, plan);
          run(form.request());
        });
      }
    });
  }
  state.planner = initPlanner(async (problem, plan) => {
    state.pending = true; // this run replaces the simulator's default first run
    $("tab-sim").click();
    await form.loadServing(problem, plan);
    await run(form.request());
    state.pending = false;
  });
  // the planner is the front door; ?tab=sim or ?tab=studies opens another tab
  const tab = new URLSearchParams(location.search).get("tab");
  $(tab === "sim" || tab === "studies" ? `tab-${tab}` : "tab-planner").click();
  document.body.dataset.interactive = "1";
  state.interactiveAt = performance.now(); // ms since navigation start
}

main();
