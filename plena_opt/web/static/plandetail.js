// One plan of the planner's answer (where its time goes, memory per device against capacity,
// TTFT/TPOT under load), two or three plans side by side, and what to take away (the launch
// bundle, the CLI command that reproduces the search, the URL of this view).

import { esc, span } from "./plot.js";
import { TABLE_METRICS, cellText, columns, formatter, shown, tooltip } from "./metrics.js";

const KEY = /^tp(\d+)-ep(\d+)-dp(\d+)-pp(\d+)-cp(\d+)-(\w+?)-(\w+?)-b(\d+)(?:-(\w+))?$/;
const ms = (v) => (v == null ? "–" : v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(2) : v.toPrecision(3));
const gb = (b) => (b == null ? "–" : (b / 1e9).toFixed(b >= 1e10 ? 0 : 2));

const NO_ENGINE_MODEL = "an uploaded model needs the engine model id (form) for a launch bundle";
/** Whether the job's plans can be exported (an uploaded model needs the id the engines load). */
const exportable = (view) => !view.uploaded || Boolean(view.fields.engine_model);

/** Point the bundle links under `root` (`data-bundle`: a plan key) at job `job`'s zips. */
export function linkBundles(root, job) {
  for (const a of root.querySelectorAll("a[data-bundle]")) {
    a.href = `/api/planner/jobs/${encodeURIComponent(job)}/bundle?key=${encodeURIComponent(a.dataset.bundle)}`;
  }
}

/** A point key as the simulator form's plan (null for a disaggregated deployment). */
export function keyPlan(key) {
  const m = KEY.exec(key);
  if (!m) return null;
  const [tp, ep, dp, pp, cp] = m.slice(1, 6).map(Number);
  return { tp, ep, dp, pp, cp, moe_tp_mode: m[6], comm_overlap: m[7], batch_size: Number(m[8]) };
}

function sum(stages, k) {
  return stages.reduce((a, s) => a + s[k], 0);
}

/** Compute / HBM / network of one phase: a bar each, scaled to the largest of them. */
function phase(name, stages) {
  if (!stages.length) return "";
  const parts = [["compute", sum(stages, "compute_ms")], ["HBM", sum(stages, "hbm_ms")], ["network", sum(stages, "network_ms")]];
  const top = Math.max(...parts.map((p) => p[1]), 1e-12);
  const total = sum(stages, "total_ms");
  const bars = parts.map(([k, v]) => `<div class="bar"><span>${k}</span><div class="bar-t"><span class="b-${k.toLowerCase()}" style="width:${(100 * v) / top}%"></span></div><span class="bar-v">${ms(v)} ms</span></div>`).join("");
  const per = stages.length > 1 ? `<table class="stages"><tr><th>stage</th><th>compute</th><th>HBM</th><th>network</th><th>step</th></tr>${stages.map((s) => `<tr><td>${s.stage}</td><td>${ms(s.compute_ms)}</td><td>${ms(s.hbm_ms)}</td><td>${ms(s.network_ms)}</td><td>${ms(s.total_ms)}</td></tr>`).join("")}</table>` : "";
  return `<div class="phase"><h5>${name} <span class="muted">${ms(total)} ms over ${stages.length} stage(s); the parts overlap</span></h5>${bars}${per}</div>`;
}

function memory(p) {
  const used = p.weight_bytes + p.kv_bytes;
  const cap = p.capacity_bytes;
  const pct = (b) => (cap ? (100 * b) / cap : 0);
  const fits = p.fits === false ? `<b class="warn">does not fit</b>` : "fits";
  return `<div class="mem"><h5>Memory per device <span class="muted">${gb(used)} of ${gb(cap)} GB · ${fits}</span></h5>
    <div class="mem-bar" title="weights ${gb(p.weight_bytes)} GB, KV cache ${gb(p.kv_bytes)} GB, capacity ${gb(cap)} GB">
      <span class="m-w" style="width:${pct(p.weight_bytes)}%"></span><span class="m-kv" style="width:${pct(p.kv_bytes)}%"></span></div>
    <div class="front-legend"><span><i class="m-w"></i>weights ${gb(p.weight_bytes)} GB</span><span><i class="m-kv"></i>KV cache ${gb(p.kv_bytes)} GB</span><span><i class="m-free"></i>free</span></div></div>`;
}

function underLoad(p) {
  const u = p.under_load;
  if (!u) return p.under_load_note ? `<p class="hint">${esc(p.under_load_note)}</p>` : "";
  const e = u.error_bars;
  const iv = (k) => (e ? span(e[`${k}_mean_ms_low`], e[`${k}_mean_ms_high`], ms) : "");
  const row = (name, d, k) => `<tr><td>${name}</td><td class="m-${k}">${ms(d.mean)}${iv(k)}</td><td>${ms(d.p50)}</td><td>${ms(d.p90)}</td><td>${ms(d.p99)}</td></tr>`;
  const bars = e
    ? `<p class="hint" id="pl-load-bars">mean (low–high): the ${Math.round(e.level * 100)} % interval of the model's measured error on group ${esc(e.group)} (${e.group_rows} measured runs)</p>`
    : `<p class="hint" id="pl-load-bars">no interval: no measured group for this engine</p>`;
  const range = u.range_ratio ? `, lengths ±${u.range_ratio}` : "";
  return `<h5>Under load <span class="muted">${esc(u.engine)} ${esc(u.engine_version)}, ${u.request_rate != null ? `${u.request_rate} requests/s` : `${u.concurrency} clients`}${range}, memory fraction ${u.memory_fraction}: ${u.output_tps_per_gpu.toFixed(0)} tokens/s per GPU, ${u.output_tps_per_user.toFixed(0)} per user</span></h5>
    <table class="load" id="pl-load"><tr><th>ms</th><th>mean</th><th>p50</th><th>p90</th><th>p99</th></tr>${row("TTFT", u.ttft_ms, "ttft")}${row("TPOT", u.tpot_ms, "tpot")}</table>${bars}${speculative(u)}`;
}

/** The speculative verdict of ``estimate --speculative`` (mean TPOT without and with, ms). */
function speculative(u) {
  if (u.speculative_note) return `<p class="hint" id="pl-spec">${esc(u.speculative_note)}</p>`;
  const s = u.speculative;
  if (!s) return "";
  const verdict = s.pays ? "pays" : "<b class=\"warn\">does not pay</b>";
  return `<p class="hint" id="pl-spec">speculative decoding ${esc(s.method)} K=${s.k} (acceptance ${s.acceptance.join("/")}, ${esc(s.acceptance_source)}): mean TPOT ${ms(s.tpot_without_ms)} ms without, ${ms(s.tpot_with_ms)} ms with: ${verdict}</p>`;
}

/** The decode step's attribution as ``plena-opt estimate`` prints it (ms per token). */
function attribution(a) {
  const parts = Object.entries(a || {}).filter(([, v]) => v > 0);
  if (!parts.length) return "";
  return `<p class="hint" id="pl-attribution">decode step attribution: ${parts.map(([k, v]) => `${esc(k.replaceAll("_", " "))} ${ms(v)} ms`).join(" · ")}</p>`;
}

function pool(p) {
  const head = p.role === "plan" ? "" : `<h4>${p.role} pool: ${p.workers} × ${esc(p.label)} (${p.devices} GPUs each)</h4>`;
  return `<div class="pool">${head}<div class="pool-grid"><div>${phase("Prefill", p.prefill)}${phase("One decode step", p.decode)}</div>
    <div>${memory(p)}${underLoad(p)}
    <p class="hint">static model: TTFT ${ms(p.ttft_ms)} ms, decode step ${ms(p.tpot_ms)} ms, ${p.tps.toFixed(0)} tokens/s</p>
    ${attribution(p.decode_attribution_ms)}</div></div></div>`;
}

/** Where a point's interval comes from (or why it has none) and whether it is robust. */
function pointBars(p) {
  const robust = p.robust == null ? "" : p.robust ? ` Robust: the SLA holds at ${esc(p.robust_basis)}.` : ` Not robust: ${esc(p.robust_reason)} at ${esc(p.robust_basis)}.`;
  if (p.interval_group) return `<br><span class="hint" id="pl-detail-bars">(low–high): the ${Math.round((p.interval_level || 0.9) * 100)} % interval of the model's measured error on group ${esc(p.interval_group)}.${robust}</span>`;
  return p.interval_note ? `<br><span class="hint" id="pl-detail-bars">${esc(p.interval_note)}${robust}</span>` : "";
}

/** ` · E2E 616.92 ms` of a point under load (the registry's heading, unit and tooltip). */
function e2eFig(point, metrics) {
  const m = (metrics || []).find((x) => x.name === "e2e_seconds");
  const v = m ? shown(m, point) : null;
  return v == null ? "" : ` · <span id="pl-detail-e2e" title="${esc(tooltip(m))}">${esc(m.label)} ${formatter(m)(v)} ${esc(m.display_unit)}</span>`;
}

/** The plan view: its pools, the simulator link (aggregated plans) and the compare button. */
export function detailHtml(d, point, view, metrics) {
  const f0 = (v) => v.toFixed(0);
  const fig = point ? `<span id="pl-detail-figs">${point.tps_per_gpu.toFixed(0)} tokens/s per GPU${span(point.tps_per_gpu_low, point.tps_per_gpu_high, f0)} · ${point.tps_per_user.toFixed(0)} per user · TTFT ${ms(point.ttft_ms)} ms${span(point.ttft_ms_low, point.ttft_ms_high, ms)} · TPOT ${ms(point.tpot_ms)} ms${span(point.tpot_ms_low, point.tpot_ms_high, ms)}${e2eFig(point, metrics)}${point.usd_per_mtok == null ? "" : ` · $${point.usd_per_mtok.toPrecision(3)} per M output tokens${span(point.usd_per_mtok_low, point.usd_per_mtok_high, (v) => v.toPrecision(3))}`}</span> <span class="muted">(${esc(point.basis)})</span>${pointBars(point)}` : "";
  const canSim = !d.disaggregated && !view.uploaded && !view.model_dir && !view.noc_uploaded;
  const why = d.disaggregated ? "a disaggregated deployment has no single-plan simulation"
    : view.noc_uploaded ? "an uploaded NoC profile is not in the simulator's list" : "this model is not in the simulator's catalog";
  const sim = canSim ? `<button type="button" id="pl-open-sim">Open in the simulator</button>` : `<span class="hint">${why}</span>`;
  const bundle = exportable(view)
    ? `<a class="btn" id="pl-bundle" data-bundle="${esc(d.key)}" download>Launch bundle (.zip)</a>`
    : `<span class="hint" id="pl-bundle-note">${NO_ENGINE_MODEL}</span>`;
  return `<div class="toolbar"><h3 id="pl-detail-title">${esc(point ? point.label : d.key)}</h3><code>${esc(d.key)}</code><span class="grow"></span>
    ${sim}<button type="button" id="pl-add-compare">Add to compare</button>${bundle}</div>
    <p>${fig}</p>${d.pools.map(pool).join("")}`;
}

/** Two or three plans side by side (the metric rows: the registry's declarations). */
export function compareHtml(keys, points, details, metrics) {
  const rows = [
    ["mode", (p) => p.mode],
    ["GPUs", (p) => p.devices],
    ...columns(metrics, TABLE_METRICS, points.filter(Boolean)).map((m) => [`${m.label} ${m.display_unit}`, (p) => cellText(m, p), tooltip(m)]),
  ];
  const poolRows = [
    ["prefill compute / HBM / network ms", (q) => `${ms(sum(q.prefill, "compute_ms"))} / ${ms(sum(q.prefill, "hbm_ms"))} / ${ms(sum(q.prefill, "network_ms"))}`],
    ["decode step compute / HBM / network ms", (q) => `${ms(sum(q.decode, "compute_ms"))} / ${ms(sum(q.decode, "hbm_ms"))} / ${ms(sum(q.decode, "network_ms"))}`],
    ["memory per device GB", (q) => `${gb(q.weight_bytes + q.kv_bytes)} of ${gb(q.capacity_bytes)}`],
    ["TTFT / TPOT under load (mean ms)", (q) => (q.under_load ? `${ms(q.under_load.ttft_ms.mean)} / ${ms(q.under_load.tpot_ms.mean)}` : "–")],
  ];
  const head = `<tr><th></th>${points.map((p, i) => `<th>${esc(p ? p.label : keys[i])}</th>`).join("")}</tr>`;
  const body = rows.map(([n, f, tip]) => `<tr><td${tip ? ` title="${esc(tip)}"` : ""}>${esc(n)}</td>${points.map((p) => `<td>${p ? esc(f(p)) : "–"}</td>`).join("")}</tr>`).join("");
  const pools = poolRows.map(([n, f]) => `<tr><td>${n}</td>${details.map((d) => `<td>${d.pools.map((q) => esc(f(q))).join("<br>")}</td>`).join("")}</tr>`).join("");
  return `<h3>Compare</h3><table class="compare" id="pl-compare-table">${head}${body}${pools}</table>
    <p class="hint">A disaggregated deployment lists its prefill pool, then its decode pool.</p>`;
}

/** Take it away: the CLI command, the URL of this view, the bundle of the open plan. */
export function takeawayHtml(view, plan, href) {
  const bundleKey = plan;
  const link = bundleKey && !exportable(view)
    ? `<span class="hint">${NO_ENGINE_MODEL}</span>`
    : bundleKey
    ? `<a id="pl-bundle-2" data-bundle="${esc(bundleKey)}" download>launch bundle of ${esc(bundleKey)} (.zip, the files of plena-opt export)</a>`
    : `<span class="hint">open a plan to download its launch bundle</span>`;
  const upload = (view.uploaded ? `<p class="hint">The uploaded config.json is given as --model-path config.json: save it beside you first.</p>` : "")
    + (view.noc_uploaded ? `<p class="hint" id="pl-noc-note">The uploaded NoC profile is given as --noc noc.json: save it beside you first.</p>` : "");
  return `<h3>Take it away</h3>
    <label>CLI command that reproduces this search</label><pre class="cmd" id="pl-command">${esc(view.command)}</pre>${upload}
    <label>URL of this view</label><pre class="cmd" id="pl-url">${esc(href)}</pre>
    <div class="toolbar"><button type="button" id="pl-copy-url">Copy URL</button>${link}</div>`;
}
