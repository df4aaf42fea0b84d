// Change one knob of an opened plan (batch, tp, precision, or the load: concurrency or request
// rate) and see the effect without a new search: POST /api/planner/jobs/{job}/reestimate prices
// the changed plan (plena_opt.api.plan_knobs); a bad value comes back 422 naming the field, with
// the CLI's message.

import { esc } from "./plot.js";

const KEY = /^tp(\d+)-ep\d+-dp\d+-pp\d+-cp\d+-\w+?-\w+?-b(\d+)(?:-(\w+))?$/;
const ms = (v) => (v == null ? "–" : v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(2) : v.toPrecision(3));
const gb = (b) => (b == null ? "–" : (b / 1e9).toFixed(2));

/** The knob form of plan `key` (null for a disaggregated deployment). */
export function knobsHtml(key, view, precisions) {
  const m = KEY.exec(key);
  if (!m) return `<p class="hint">Open one pool's plan to change its knobs (a deployment has two).</p>`;
  const f = view.fields;
  const byRate = f.request_rate != null;
  const load = byRate ? f.request_rate : f.concurrency ?? "";
  const prec = m[3] || f.precision || "";
  const opts = [["", "as searched"], ...precisions.map((p) => [p, p])]
    .map(([v, t]) => `<option value="${esc(v)}"${v === prec ? " selected" : ""}>${esc(t)}</option>`).join("");
  return `<form id="pl-knobs" class="knobs" novalidate><h4>Change one knob <span class="muted">re-estimated, no new search</span></h4>
    <label>batch <input id="pl-k-batch" type="number" min="1" value="${m[2]}" data-was="${m[2]}"></label>
    <label>tp <input id="pl-k-tp" type="number" min="1" value="${m[1]}" data-was="${m[1]}"></label>
    <label>precision <select id="pl-k-precision" data-was="${esc(prec)}">${opts}</select></label>
    <label>${byRate ? "request rate /s" : "concurrency"} <input id="pl-k-load" type="number" min="0" step="any" value="${esc(load)}" data-was="${esc(load)}" data-kind="${byRate ? "request_rate" : "concurrency"}"></label>
    <button type="submit" id="pl-k-run">Re-estimate</button></form>
    <div id="pl-knob-error" class="error" role="alert"></div><div id="pl-knob-result" aria-live="polite"></div>`;
}

/** The knobs that differ from the plan's (the request body besides `key`). */
export function knobChanges(root) {
  const body = {};
  const val = (id) => root.querySelector(id);
  for (const [id, name] of [["#pl-k-batch", "batch_size"], ["#pl-k-tp", "tp"]]) {
    const x = val(id);
    if (x.value.trim() !== x.dataset.was) body[name] = x.value.trim() === "" ? null : Number(x.value);
  }
  const p = val("#pl-k-precision");
  if (p.value !== p.dataset.was && p.value) body.precision = p.value;
  const l = val("#pl-k-load");
  if (l.value.trim() !== l.dataset.was && l.value.trim() !== "") body[l.dataset.kind] = Number(l.value);
  return body;
}

function figures(pool) {
  const u = pool.under_load;
  return {
    "TTFT ms (static)": ms(pool.ttft_ms),
    "decode step ms": ms(pool.tpot_ms),
    "tokens/s": pool.tps.toFixed(0),
    "memory per device GB": `${gb(pool.weight_bytes + pool.kv_bytes)} of ${gb(pool.capacity_bytes)}${pool.fits === false ? " (does not fit)" : ""}`,
    "TTFT p50 under load ms": u ? ms(u.ttft_ms.p50) : "–",
    "TPOT p50 under load ms": u ? ms(u.tpot_ms.p50) : "–",
    "TTFT / TPOT mean under load ms (measured-error interval)": u ? `${ms(u.ttft_ms.mean)}${bar(u, "ttft")} / ${ms(u.tpot_ms.mean)}${bar(u, "tpot")}` : "–",
    "tokens/s per GPU under load": u ? u.output_tps_per_gpu.toFixed(0) : "–",
  };
}

/** ` (lo–hi)` of a mean under load from its measured error (`error_bars`), or "". */
function bar(u, k) {
  const e = u.error_bars;
  return e ? ` (${ms(e[`${k}_mean_ms_low`])}–${ms(e[`${k}_mean_ms_high`])})` : "";
}

/** Before and after, side by side. */
export function knobResultHtml(before, after) {
  const a = figures(before.pools[0]);
  const b = figures(after.detail.pools[0]);
  const what = Object.entries(after.changed).map(([k, v]) => `${k} → ${v}`).join(", ");
  const rows = Object.keys(a).map((k) => `<tr><td>${k}</td><td>${esc(a[k])}</td><td${a[k] !== b[k] ? ' class="changed"' : ""}>${esc(b[k])}</td></tr>`).join("");
  return `<table class="compare" id="pl-knob-table"><tr><th>${esc(what || "nothing changed")}</th><th>${esc(before.key)}</th><th>${esc(after.key)}</th></tr>${rows}</table>`;
}

/** Wire the knob form in `root`: `post(body)` re-estimates; results and errors shown below it. */
export function wireKnobs(root, key, before, post) {
  const form = root.querySelector("#pl-knobs");
  if (!form) return;
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const err = root.querySelector("#pl-knob-error");
    err.textContent = "";
    err.dataset.field = "";
    try {
      const after = await post({ key, ...knobChanges(root) });
      root.querySelector("#pl-knob-result").innerHTML = knobResultHtml(before, after);
      document.body.dataset.reestimated = after.key;
    } catch (e) {
      err.textContent = `${e.field ? e.field + ": " : ""}${e.message}`;
      err.dataset.field = e.field || "";
    }
  });
}
