// The planner's answer: the one-line recommendation, the front drawn as tokens/s per GPU against
// tokens/s per user (log axes; the TPOT SLA region shaded; aggregated blue, disaggregated orange,
// infeasible scored plans grey with the constraint they break on hover), and the front's table.

import { esc, scatter, span } from "./plot.js";
import { TABLE_METRICS, cell, columns, heading } from "./metrics.js";

const MODE_CLASS = { aggregated: "agg", disaggregated: "disagg", infeasible: "violates" };
const f0 = (v) => (v == null ? "–" : v >= 100 ? v.toFixed(0) : v.toPrecision(3));
const f2 = (v) => (v == null ? "–" : v.toFixed(2));

/** The recommendation in one line (kind, plan, figures and why). */
export function recommendationLine(rec, infeasible = {}) {
  if (!rec) {
    const why = Object.entries(infeasible).map(([k, n]) => `${k} broken by ${n} plans`).join(", ");
    return `<p class="rec muted" id="pl-rec">No plan to recommend: no scored plan met the constraints${why ? ` (${esc(why)})` : ""}; relax the SLA or add GPUs.</p>`;
  }
  const g = rec.figures || {};
  const k = (v) => (v == null ? null : v * 1e3);
  const ttft = g.ttft_seconds == null ? "" : `, TTFT ${(g.ttft_seconds * 1e3).toFixed(1)} ms${span(k(g.ttft_seconds_low), k(g.ttft_seconds_high), (v) => v.toFixed(1))}`;
  const tpot = g.tpot_seconds == null ? "" : `, TPOT ${(g.tpot_seconds * 1e3).toFixed(2)} ms${span(k(g.tpot_seconds_low), k(g.tpot_seconds_high), f2)}`;
  const tps = g.tps_per_device == null ? "" : ` — ${g.tps_per_device.toFixed(0)} tokens/s per GPU${span(g.tps_per_device_low, g.tps_per_device_high, f0)}`;
  return `<p class="rec" id="pl-rec"><b>Recommended (${esc(rec.kind)}):</b> <a href="#" data-open="${esc(rec.decode_key ? `${g.prefill_workers}P:${rec.key}+${g.decode_workers}D:${rec.decode_key}` : rec.key)}">${esc(rec.label)}</a>${tps}${ttft}${tpot} <span class="muted">(${esc(g.basis || "")}) · ${esc(rec.reason || "")}</span></p>`;
}

function hover(p) {
  const lines = [
    `${p.label} (${p.mode})`, p.key,
    `${f0(p.tps_per_gpu)} tokens/s per GPU · ${f0(p.tps_per_user)} tokens/s per user`,
    `TTFT ${f2(p.ttft_ms)} ms · TPOT ${f2(p.tpot_ms)} ms · ${p.devices} GPUs`,
    `basis: ${p.basis}`,
  ];
  if (p.ttft_ms_low != null) lines.push(`${ivName(p)}: TTFT ${f2(p.ttft_ms_low)}–${f2(p.ttft_ms_high)} ms · TPOT ${f2(p.tpot_ms_low)}–${f2(p.tpot_ms_high)} ms`);
  if (p.reason) lines.push(`infeasible: ${p.reason}`);
  return lines.join("\n");
}

function plot(v) {
  const pts = v.answer.points.filter((p) => p.tps_per_gpu > 0 && p.tps_per_user > 0);
  if (!pts.length) return `<p class="muted">No point to draw.</p>`;
  const tpot = v.fields.max_tpot_ms;
  const slaX = tpot ? 1000 / tpot : null; // TPOT <= SLA  <=>  tokens/s per user >= 1000 / SLA
  const order = ["infeasible", "aggregated", "disaggregated"];
  const sorted = [...pts].sort((a, b) => order.indexOf(a.mode) - order.indexOf(b.mode));
  const points = sorted.map((p) => ({
    x: p.tps_per_user, y: p.tps_per_gpu, cls: MODE_CLASS[p.mode] || "agg", r: p.feasible ? 6 : 4,
    title: hover(p), attrs: { "data-key": p.key, "data-mode": p.mode, tabindex: p.feasible ? "0" : "-1" },
  }));
  if (slaX) points.push({ x: slaX, y: Math.min(...pts.map((p) => p.tps_per_gpu)), cls: "sla-anchor", r: 0, title: "", attrs: {} });
  const { svg } = scatter({
    id: "pl-plot", points, W: 760, H: 400,
    xlabel: "tokens/s per user (1000 / TPOT ms)", ylabel: "tokens/s per GPU",
    under: slaX ? (X, Y, box) => {
      const x = Math.max(X(slaX), box.l);
      return `<rect id="pl-sla" class="sla-region" x="${x}" y="${box.t}" width="${Math.max(box.r - x, 0)}" height="${box.b - box.t}"><title>meets the TPOT SLA (≤ ${tpot} ms)</title></rect>`;
    } : null,
  });
  const ttft = v.fields.max_ttft_ms ? ` TTFT ≤ ${v.fields.max_ttft_ms} ms is a search constraint (plans above it are grey).` : "";
  const shade = slaX ? `<span><i class="sla-swatch"></i>TPOT ≤ ${tpot} ms</span>` : "";
  return `${svg}<div class="front-legend"><span><i class="dot agg"></i>aggregated</span>
    <span><i class="dot disagg"></i>disaggregated</span><span><i class="dot violates"></i>infeasible (hover: why)</span>${shade}</div>
    <p class="hint">Hover a point for its figures, click it to open the plan.${ttft}</p>`;
}

/** The front's table; its metric columns (headings, units, tooltips) are the registry's. */
function table(v, compare, metrics) {
  const load = v.answer.summary && v.answer.summary.under_load;
  const at = load ? ` ${load.percentile}` : "";
  const pts = v.answer.points.filter((p) => p.feasible).sort((a, b) => b.tps_per_gpu - a.tps_per_gpu);
  const cols = columns(metrics, TABLE_METRICS, pts);
  const rows = pts
    .map((p) => `<tr data-key="${esc(p.key)}" data-mode="${p.mode}" tabindex="0">
      <td><span class="dot ${MODE_CLASS[p.mode]}"></span>${esc(p.mode)}</td><td>${esc(p.label)}${robustMark(p)}</td><td>${p.devices}</td>
      ${cols.map((m) => cell(m, p)).join("")}
      <td><input type="checkbox" data-compare="${esc(p.key)}" aria-label="compare ${esc(p.label)}"${compare.includes(p.key) ? " checked" : ""}></td></tr>`)
    .join("");
  return `<table class="front-table" id="pl-table"><thead><tr><th>mode</th><th>plan</th><th>GPUs</th>
    ${cols.map((m) => heading(m, at)).join("")}<th>compare</th></tr></thead><tbody>${rows}</tbody></table>`;
}

/** "90 % interval" of a point's measured group (or "interval"). */
function ivName(p) {
  return p.interval_level ? `${Math.round(p.interval_level * 100)} % interval` : "interval";
}

/** A front plan's robustness mark: SLA holds (or not) at the interval's pessimistic end. */
function robustMark(p) {
  if (p.robust == null) return "";
  const why = p.robust ? `SLA holds at ${p.robust_basis}` : `misses the SLA at ${p.robust_basis}: ${p.robust_reason}`;
  return ` <span class="badge ${p.robust ? "robust" : "fragile"}" title="${esc(why)}">${p.robust ? "robust" : "not robust"}</span>`;
}

/** What the front's intervals are (or why there are none), and goodput's interval. */
function intervalsHint(v) {
  const pts = v.answer.points.filter((p) => p.feasible);
  const withIv = pts.filter((p) => p.interval_group);
  const g = v.answer.summary.goodput_interval;
  if (!withIv.length) {
    const note = (pts.find((p) => p.interval_note) || {}).interval_note;
    return note ? `<p class="hint" id="pl-intervals">error bars: ${esc(note)}</p>` : "";
  }
  const groups = [...new Set(withIv.map((p) => p.interval_group))].join(", ");
  const good = g && (g.goodput_tps_per_device_low != null || g.goodput_tps_per_device_high != null)
    ? ` Goodput ${f0(g.goodput_tps_per_device_low)}–${f0(g.goodput_tps_per_device_high)} tokens/s per GPU across the interval.` : "";
  const some = withIv.length < pts.length ? ` (${pts.length - withIv.length} plan(s) without one: ${esc((pts.find((p) => !p.interval_group && p.interval_note) || {}).interval_note || "")})` : "";
  return `<p class="hint" id="pl-intervals">(low–high): the ${ivName(withIv[0])} from the model's measured error on group ${esc(groups)}${some}${withIv[0].robust_basis ? `; robust: the SLA holds at ${esc(withIv[0].robust_basis)}` : ""}.${good}</p>`;
}

/** The front of a running search as it grows (``progress.front``, thinned by the server). */
export function liveHtml(v) {
  const p = v.progress || {};
  const front = p.front || [];
  const shown = front.length < (p.front_size || 0) ? ` (${front.length} of ${p.front_size} drawn)` : "";
  return `<h4 id="pl-live">The front so far: ${front.length} plans${shown}</h4>${plot({ answer: { points: front }, fields: v.fields })}`;
}

/** The search's warnings, as the CLI prints them (plans not priced, batch sizes not searched, …). */
function warningsHtml(warnings) {
  if (!warnings || !warnings.length) return "";
  return `<ul class="hint" id="pl-warnings">${warnings.map((w) => `<li>warning: ${esc(w)}</li>`).join("")}</ul>`;
}

/** The answer panel of a finished (or cancelled) job. */
export function answerHtml(v, compare, metrics) {
  const s = v.answer.summary;
  const partial = s.partial ? ` <b class="warn">partial (${esc(s.stop_reason || "stopped")})</b>` : "";
  const rec = v.answer.recommendation;
  const said = rec && rec.reason && s.verdict && rec.reason.includes(s.verdict);
  const verdict = s.verdict && !said ? `<p class="verdict">${esc(s.verdict)}</p>` : "";
  const empty = s.empty_reason ? `<p class="error">${esc(s.empty_reason)}</p>` : "";
  const note = v.note ? `<p class="verdict" id="pl-note">${esc(v.note)}</p>` : "";
  const front = v.answer.points.find((p) => p.feasible);
  const under = s.under_load && front ? ` ${esc(front.basis)}` : "";
  return `${recommendationLine(v.answer.recommendation, s.infeasible)}${verdict}${note}${empty}
    <div class="answer-grid"><div>${plot(v)}</div>
    <div class="answer-side"><h4 id="pl-front-head">Front${under} (${v.answer.points.filter((p) => p.feasible).length} plans)</h4>${table(v, compare, metrics)}
    ${intervalsHint(v)}    <p class="hint">${s.evaluated} of ${s.legal_points} plans scored, ${esc(s.sampler)} sampler${partial}</p>${warningsHtml(s.warnings)}</div></div>`;
}

/** Clicks and keys: a point or a row opens its plan; a checkbox adds it to the comparison. */
export function wireAnswer(root, v, { open, toggle }) {
  const go = (key) => key && open(key);
  for (const c of root.querySelectorAll("circle.pt[data-key]")) {
    if (c.dataset.mode === "infeasible") continue;
    c.addEventListener("click", () => go(c.dataset.key));
    c.addEventListener("keydown", (ev) => ev.key === "Enter" && go(c.dataset.key));
  }
  for (const tr of root.querySelectorAll("#pl-table tbody tr")) {
    tr.addEventListener("click", (ev) => ev.target.tagName !== "INPUT" && go(tr.dataset.key));
    tr.addEventListener("keydown", (ev) => ev.key === "Enter" && go(tr.dataset.key));
  }
  for (const x of root.querySelectorAll("input[data-compare]")) {
    x.addEventListener("change", () => toggle(x.dataset.compare, x.checked));
  }
  const rec = root.querySelector("#pl-rec a[data-open]");
  if (rec) rec.addEventListener("click", (ev) => { ev.preventDefault(); go(rec.dataset.open); });
}
