// The planner tab: state the problem, start a search as a job, watch its progress (polled),
// cancel it, read the answer (plot, recommendation, table), open one plan, compare two or three,
// take it away (bundle, CLI command, URL). The URL holds the job, the open plan and the compared
// plans, so reloading the page reattaches to the running search or reopens the same view.

import { esc } from "./plot.js";
import { answerHtml, liveHtml, wireAnswer } from "./planplot.js";
import { compareHtml, detailHtml, keyPlan, linkBundles, takeawayHtml } from "./plandetail.js";
import { knobsHtml, wireKnobs } from "./planknobs.js";

const $ = (id) => document.getElementById(id);
const POLL_MS = 200;
const st = { catalog: null, metrics: [], upload: null, nocUpload: null, job: null, view: null, plan: null, compare: [], details: {}, timer: null };
window.plenaPlanner = st; // for tests and benchmarks

const planner = {
  list: () => call("GET", "/api/planner/catalog"),
  metrics: () => call("GET", "/api/metrics"), // the registry's declarations (table headings)
  start: (body) => call("POST", "/api/planner/jobs", body),
  job: (id) => call("GET", `/api/planner/jobs/${encodeURIComponent(id)}`),
  cancel: (id) => call("POST", `/api/planner/jobs/${encodeURIComponent(id)}/cancel`),
  plan: (id, key) => call("GET", `/api/planner/jobs/${encodeURIComponent(id)}/plan?key=${encodeURIComponent(key)}`),
  reestimate: (id, body) => call("POST", `/api/planner/jobs/${encodeURIComponent(id)}/reestimate`, body),
};

async function call(method, path, body) {
  const res = await fetch(path, {
    method, headers: body ? { "Content-Type": "application/json" } : {}, body: body ? JSON.stringify(body) : undefined,
  });
  const data = await res.json().catch(() => null);
  if (!res.ok) {
    const first = data && data.detail && data.detail[0];
    const err = new Error((data && (data.message || (first && first.msg))) || res.statusText);
    err.field = data ? data.field : "";
    err.status = res.status;
    throw err;
  }
  return data;
}

function fill(sel, items, chosen) {
  sel.innerHTML = items.map(([v, t]) => `<option value="${esc(v)}"${v === chosen ? " selected" : ""}>${esc(t)}</option>`).join("");
}

function fillForm(c) {
  const d = c.defaults;
  fill($("pl-model"), c.models.map((m) => [m, m]), d.model);
  fill($("pl-chip"), c.chips.map((x) => [x.name, x.gpu ? `${x.name} (GPU)` : `${x.name} (PLENA)`]), d.chip);
  fill($("pl-noc"), c.nocs.map((n) => [n.name, `${n.name} · ${n.devices} devices`]), d.noc);
  fill($("pl-engine"), c.engines.map((e) => [e, e]), "vllm");
  fill($("pl-precision"), [["", "chip default"], ...c.precisions.map((p) => [p, p])], "");
  fill($("pl-serving"), c.serving.map((m) => [m, m]), "both");
  fill($("pl-routing"), c.routings.map((r) => [r, r]), "balanced");
  fill($("pl-kv-precision"), [["", "default"], ...c.precisions.map((p) => [p, p])], "");
  fill($("pl-spec-method"), c.speculative_methods.map((m) => [m, m]), "eagle");
  fill($("pl-overlap"), c.overlap_policies.map((o) => [o, o]), c.overlap_policies[0]);
  const version = () => { $("pl-engine-version").placeholder = c.engine_versions[$("pl-engine").value] || ""; };
  $("pl-engine").addEventListener("change", version);
  version();
  $("pl-objectives").innerHTML = c.objectives
    .map((o) => `<label class="check"><input type="checkbox" value="${o}"${["ttft", "tps"].includes(o) ? " checked" : ""}> ${o}</label>`)
    .join("");
  $("pl-filter").addEventListener("input", () => {
    const q = $("pl-filter").value.trim().toLowerCase();
    const keep = c.models.filter((m) => m.includes(q));
    const cur = $("pl-model").value;
    fill($("pl-model"), keep.map((m) => [m, m]), keep.includes(cur) ? cur : keep[0]);
  });
  $("pl-noc").addEventListener("change", nodesHint);
  $("pl-gpn").addEventListener("input", nodesHint);
  $("pl-devices").addEventListener("input", nodesHint);
  nodesHint();
}

function nodesHint() {
  if (st.nocUpload) {
    $("pl-nodes").textContent = "devices: as the uploaded profile has";
    return;
  }
  const n = st.catalog.nocs.find((x) => x.name === $("pl-noc").value);
  const used = Number($("pl-devices").value) || (n ? n.devices : 0);
  const gpn = Number($("pl-gpn").value) || 8;
  $("pl-nodes").textContent = `${used} GPUs = ${Math.ceil(used / gpn)} node(s)`;
}

/** The request body the form states (empty inputs left out: the server's defaults). */
export function formFields() {
  const f = {};
  const num = (id) => ($(id).value.trim() === "" ? undefined : Number($(id).value));
  if (st.upload) {
    f.model_document = st.upload.doc;
    f.model_name = st.upload.name;
    if ($("pl-engine-model").value.trim()) f.engine_model = $("pl-engine-model").value.trim();
  } else if ($("pl-model-dir").value.trim()) f.model_dir = $("pl-model-dir").value.trim();
  else f.model = $("pl-model").value;
  if (st.nocUpload) Object.assign(f, { noc_document: st.nocUpload.doc, noc_name: st.nocUpload.name });
  else f.noc = $("pl-noc").value;
  const byRate = $("pl-load-kind").value === "rate";
  Object.assign(f, {
    chip: $("pl-chip").value, devices: num("pl-devices"), gpus_per_node: num("pl-gpn"),
    input_seq: num("pl-input"), output_seq: num("pl-output"),
    concurrency: byRate ? undefined : num("pl-conc"), request_rate: byRate ? num("pl-rate") : undefined,
    engine: $("pl-engine").value, max_ttft_ms: num("pl-ttft"), max_tpot_ms: num("pl-tpot"),
    objectives: [...$("pl-objectives").querySelectorAll("input:checked")].map((x) => x.value),
    precision: $("pl-precision").value || undefined, serving: $("pl-serving").value,
    percentile: $("pl-percentile").value || undefined, memory_fraction: num("pl-memfrac"),
    trials: num("pl-trials"), seed: num("pl-seed"),
  });
  if ($("pl-batches").value.trim()) f.batch_sizes = $("pl-batches").value.trim();
  Object.assign(f, moreFields(num));
  for (const k of Object.keys(f)) if (f[k] === undefined) delete f[k];
  return f;
}

/** The "more serving options" fields (empty: the CLI's defaults; balanced routing is the default). */
function moreFields(num) {
  const text = (id) => $(id).value.trim() || undefined;
  const k = num("pl-spec-k");
  const rates = text("pl-acceptance");
  return {
    range_ratio: num("pl-range"), engine_version: text("pl-engine-version"),
    routing: $("pl-routing").value === "balanced" ? undefined : $("pl-routing").value,
    kv_precision: $("pl-kv-precision").value || undefined, eplb_redundant: num("pl-eplb"),
    speculative: k, speculative_method: k === undefined ? undefined : $("pl-spec-method").value,
    acceptance: rates === undefined ? undefined : rates.split(",").map(Number),
    include_lm_head: $("pl-lm-head").checked || undefined, frequency_hz: num("pl-freq"),
    overlap: $("pl-overlap").selectedIndex > 0 ? $("pl-overlap").value : undefined,
  };
}

function setMore(f) {
  const set = (id, v) => { $(id).value = v ?? ""; };
  set("pl-range", f.range_ratio); set("pl-engine-version", f.engine_version); set("pl-eplb", f.eplb_redundant);
  set("pl-spec-k", f.speculative); set("pl-acceptance", (f.acceptance || []).join(",") || "");
  $("pl-routing").value = f.routing || "balanced";
  $("pl-kv-precision").value = f.kv_precision || "";
  $("pl-spec-method").value = f.speculative_method || "eagle";
  $("pl-lm-head").checked = Boolean(f.include_lm_head); set("pl-freq", f.frequency_hz);
  $("pl-overlap").value = f.overlap || st.catalog.overlap_policies[0];
  const given = ["range_ratio", "engine_version", "routing", "kv_precision", "eplb_redundant", "speculative",
    "include_lm_head", "overlap", "frequency_hz"];
  if (given.some((k) => f[k] != null)) $("pl-more").open = true;
}

function setForm(f) {
  const set = (id, v) => { if (v !== undefined && v !== null) $(id).value = v; };
  if (f.model && ![...$("pl-model").options].some((o) => o.value === f.model)) {
    $("pl-filter").value = "";
    $("pl-filter").dispatchEvent(new Event("input"));
  }
  set("pl-model", f.model); set("pl-chip", f.chip); set("pl-noc", f.noc); set("pl-devices", f.devices);
  set("pl-gpn", f.gpus_per_node); set("pl-input", f.input_seq); set("pl-output", f.output_seq);
  set("pl-batches", f.batch_sizes); set("pl-conc", f.concurrency); set("pl-engine", f.engine);
  set("pl-model-dir", f.model_dir); set("pl-rate", f.request_rate); set("pl-memfrac", f.memory_fraction ?? "");
  modelDirNote();
  if (f.request_rate != null) set("pl-load-kind", "rate");
  loadKind();
  set("pl-ttft", f.max_ttft_ms ?? ""); set("pl-tpot", f.max_tpot_ms ?? ""); set("pl-precision", f.precision ?? "");
  set("pl-serving", f.serving); set("pl-trials", f.trials); set("pl-seed", f.seed);
  set("pl-percentile", f.percentile ?? "");
  if (f.objectives) for (const x of $("pl-objectives").querySelectorAll("input")) x.checked = f.objectives.includes(x.value);
  setMore(f);
  nodesHint();
}

/** Keep the URL on this view: the job, the open plan, the compared plans, the form. */
function saveUrl() {
  const q = new URLSearchParams({ tab: "planner" });
  if (st.job) q.set("job", st.job);
  if (st.plan) q.set("plan", st.plan);
  if (st.compare.length) q.set("compare", st.compare.join(","));
  const f = formFields();
  delete f.model_document;
  delete f.noc_document;
  q.set("form", JSON.stringify(f));
  history.replaceState(null, "", `${location.pathname}?${q}`);
  if (st.view && st.view.answer) renderTakeaway();
}

function progressHtml(v) {
  const p = v.progress || {};
  const hv = p.hypervolume == null ? "–" : p.hypervolume.toPrecision(4);
  const total = p.total ? ` of ${p.total}` : "";
  const state = { running: "searching…", done: "finished", cancelled: "cancelled", failed: "failed" }[v.state];
  const stopped = v.stopped_after_s == null ? "" : ` · stopped ${(v.stopped_after_s * 1000).toFixed(0)} ms after cancel`;
  const took = v.elapsed_s == null ? "" : ` in ${v.elapsed_s.toFixed(1)} s`;
  return `<div class="prog" data-state="${v.state}"><b id="pl-state">${state}</b>${took}${stopped}
    <span>plans scored <b id="pl-scored">${p.done ?? 0}</b>${total}</span>
    <span>front size <b id="pl-front-size">${p.front_size ?? 0}</b></span>
    <span>hypervolume <b id="pl-hv">${hv}</b></span>
    <span class="muted">${esc(p.stage || "")}${p.trials_per_s ? ` · ${p.trials_per_s.toFixed(0)} plans/s` : ""}</span></div>
    ${v.error ? `<div class="error">${esc(v.error)}</div>` : ""}`;
}

async function start(ev) {
  ev.preventDefault();
  $("pl-error").textContent = "";
  try {
    const v = await planner.start(formFields());
    Object.assign(st, { job: v.id, plan: null, compare: [], details: {}, firstPointAt: undefined });
    for (const id of ["pl-answer", "pl-detail", "pl-compare", "pl-takeaway"]) $(id).hidden = true;
    st.startedAt = performance.now();
    saveUrl();
    show(v);
  } catch (err) {
    $("pl-error").textContent = `${err.field ? err.field + ": " : ""}${err.message}`;
    $("pl-error").dataset.field = err.field || "";
  }
}

function show(v) {
  st.view = v;
  $("pl-progress").innerHTML = progressHtml(v);
  const running = v.state === "running";
  $("pl-cancel").disabled = !running;
  $("pl-run").disabled = running;
  clearTimeout(st.timer);
  if (running) {
    const front = (v.progress && v.progress.front) || [];
    if (front.length) {
      $("pl-answer").hidden = false;
      $("pl-answer").innerHTML = liveHtml(v);
      const drawn = $("pl-answer").querySelectorAll("#pl-plot circle.pt[data-key]").length;
      st.live = { state: v.state, done: v.progress.done, front: front.length, drawn }; // for tests
      document.body.dataset.liveFront = String(front.length);
      if (st.firstPointAt === undefined && st.startedAt !== undefined) st.firstPointAt = performance.now() - st.startedAt;
    }
    st.timer = setTimeout(poll, POLL_MS);
    return;
  }
  document.body.dataset.plannerState = v.state;
  if (v.answer) renderAnswer(v);
}

async function poll() {
  try {
    show(await planner.job(st.job));
  } catch (err) {
    $("pl-progress").innerHTML = `<div class="error">${esc(err.message)}</div>`;
    $("pl-run").disabled = false;
    $("pl-cancel").disabled = true;
  }
}

function renderAnswer(v) {
  $("pl-answer").hidden = false;
  $("pl-answer").innerHTML = answerHtml(v, st.compare, st.metrics);
  wireAnswer($("pl-answer"), v, { open: openPlan, toggle: toggleCompare });
  if (st.firstDrawnAt === undefined && st.startedAt !== undefined) st.firstDrawnAt = performance.now() - st.startedAt;
  renderTakeaway();
  if (st.plan) openPlan(st.plan);
  if (st.compare.length) renderCompare();
}

function renderTakeaway() {
  $("pl-takeaway").hidden = false;
  $("pl-takeaway").innerHTML = takeawayHtml(st.view, st.plan, location.href);
  linkBundles($("pl-takeaway"), st.job);
  const copy = $("pl-copy-url");
  if (copy) copy.addEventListener("click", () => navigator.clipboard && navigator.clipboard.writeText(location.href));
}

async function detail(key) {
  if (!st.details[key]) st.details[key] = await planner.plan(st.job, key);
  return st.details[key];
}

async function openPlan(key) {
  st.plan = key;
  saveUrl();
  const box = $("pl-detail");
  box.hidden = false;
  box.innerHTML = `<p class="muted">pricing ${esc(key)}…</p>`;
  try {
    const d = await detail(key);
    const point = st.view.answer.points.find((p) => p.key === key);
    box.innerHTML = detailHtml(d, point, st.view, st.metrics) + knobsHtml(key, st.view, st.catalog.precisions);
    wireKnobs(box, key, d, (body) => planner.reestimate(st.job, body));
    linkBundles(box, st.job);
    const sim = $("pl-open-sim");
    if (sim) sim.addEventListener("click", () => openInSimulator(key));
    const cmp = $("pl-add-compare");
    if (cmp) cmp.addEventListener("click", () => toggleCompare(key, true));
    document.body.dataset.planOpen = key;
  } catch (err) {
    box.innerHTML = `<div class="error">${esc(err.field ? err.field + ": " : "")}${esc(err.message)}</div>`;
  }
}

function toggleCompare(key, on) {
  const has = st.compare.includes(key);
  if (on && !has) st.compare = [...st.compare, key].slice(-3);
  if (!on && has) st.compare = st.compare.filter((k) => k !== key);
  for (const x of document.querySelectorAll("#pl-answer input[data-compare]")) x.checked = st.compare.includes(x.dataset.compare);
  saveUrl();
  renderCompare();
}

async function renderCompare() {
  const box = $("pl-compare");
  if (st.compare.length < 2) {
    box.hidden = st.compare.length === 0;
    box.innerHTML = st.compare.length ? `<p class="muted">Pick one more plan to compare (up to three).</p>` : "";
    return;
  }
  box.hidden = false;
  const keys = [...st.compare];
  const details = await Promise.all(keys.map(detail));
  const points = keys.map((k) => st.view.answer.points.find((p) => p.key === k));
  box.innerHTML = compareHtml(keys, points, details, st.metrics);
  document.body.dataset.compared = String(keys.length);
}

let onSimulate = null;
function openInSimulator(key) {
  const f = st.view.fields;
  const plan = keyPlan(key);
  onSimulate({ model: f.model, noc: f.noc, chip: f.chip, input_seq: f.input_seq, output_seq: f.output_seq }, plan);
}

async function readUpload() {
  const file = $("pl-upload").files[0];
  st.upload = null;
  $("pl-upload-name").textContent = "";
  $("pl-engine-model-row").hidden = true;
  if (!file) return;
  try {
    const doc = JSON.parse(await file.text());
    st.upload = { doc, name: file.name.replace(/\.json$/i, "") === "config" ? "uploaded" : file.name.replace(/\.json$/i, "") };
    $("pl-upload-name").textContent = `using ${file.name} (${Object.keys(doc).length} keys) instead of the catalog model`;
    $("pl-engine-model-row").hidden = false;
  } catch (err) {
    $("pl-error").textContent = `model_document: ${file.name} is not JSON (${err.message})`;
  }
}

async function readNocUpload() {
  const file = $("pl-noc-upload").files[0];
  st.nocUpload = null;
  $("pl-noc-upload-name").textContent = "";
  if (!file) return nodesHint();
  try {
    const doc = JSON.parse(await file.text());
    st.nocUpload = { doc, name: file.name.replace(/\.json$/i, "") };
    $("pl-noc-upload-name").textContent = `using ${file.name} instead of the listed cluster`;
  } catch (err) {
    $("pl-error").textContent = `noc_document: ${file.name} is not JSON (${err.message})`;
  }
  nodesHint();
}

function modelDirNote() {
  const on = $("pl-model-dir").value.trim() !== "" && !st.upload;
  $("pl-model-dir-note").textContent = on ? "searching this directory's config.json instead of the catalog model" : "";
  $("pl-model").disabled = on;
}

function loadKind() {
  const byRate = $("pl-load-kind").value === "rate";
  $("pl-conc-row").hidden = byRate;
  $("pl-rate-row").hidden = !byRate;
}

/** Wire the tab; `simulate(problem, plan)` opens a plan in the simulator view. */
export function initPlanner(simulate) {
  onSimulate = simulate;
  const ready = (async () => {
    [st.catalog, st.metrics] = await Promise.all([planner.list(), planner.metrics()]);
    fillForm(st.catalog);
    $("pl-form").addEventListener("submit", start);
    $("pl-cancel").addEventListener("click", async () => {
      $("pl-cancel").disabled = true;
      show(await planner.cancel(st.job));
    });
    $("pl-upload").addEventListener("change", readUpload);
    $("pl-noc-upload").addEventListener("change", readNocUpload);
    $("pl-load-kind").addEventListener("change", loadKind);
    $("pl-model-dir").addEventListener("input", modelDirNote);
    const q = new URLSearchParams(location.search);
    if (q.get("form")) {
      try { setForm(JSON.parse(q.get("form"))); } catch { /* a damaged URL: keep the defaults */ }
    }
    st.plan = q.get("plan");
    st.compare = (q.get("compare") || "").split(",").filter(Boolean).slice(0, 3);
    if (q.get("job")) {
      st.job = q.get("job");
      await poll();
      if (st.view && st.view.fields) setForm(st.view.fields);
    }
    document.body.dataset.plannerReady = "1";
  })();
  return { state: st, ready };
}
