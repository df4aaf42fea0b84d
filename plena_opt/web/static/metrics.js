// The metric registry on the page: each figure's heading, display unit and tooltip come from its
// declaration (GET /api/metrics, plena_opt/metrics.py); a cell reads a point's `figures` (SI, by
// the metric's name) and shows it × `display_scale` in `display_unit`.

import { esc, span } from "./plot.js";

/** The front table's metric columns (and the compare table's rows), by registry name. */
export const TABLE_METRICS = [
  "tps_per_device", "tps_per_sequence", "ttft_seconds", "tpot_seconds", "e2e_seconds", "usd_per_million_output_tokens",
];

const f0 = (v) => (v >= 100 ? v.toFixed(0) : v.toPrecision(3));
const BY_UNIT = { ms: (v) => v.toFixed(2), "$/Mtok": (v) => v.toFixed(3), "tok/s": f0 };
const dash = (f) => (v) => (v == null ? "–" : f(v));

/** How a cell of metric `m` is written (display units). */
export const formatter = (m) => dash(BY_UNIT[m.display_unit] || ((v) => v.toPrecision(3)));

/** `m`'s figure of point `p` in display units (null where the plan has none). */
export function shown(m, p, end = "") {
  const v = ((p && p.figures) || {})[m.name + end];
  return v == null ? null : v * m.display_scale;
}

/** The declarations of `names` in that order (those the registry has), skipping the columns
 * no point of `points` has a figure for. */
export function columns(metrics, names, points) {
  const by = Object.fromEntries((metrics || []).map((m) => [m.name, m]));
  return names.map((n) => by[n]).filter((m) => m && points.some((p) => shown(m, p) != null));
}

/** A column's hover text: what it means, its unit, which way is better, its interval. */
export function tooltip(m) {
  const better = m.direction === "minimize" ? "lower is better" : "higher is better";
  const iv = m.interval ? "; (low–high): the measured-error interval" : "";
  return `${m.description} (${m.display_unit}; ${better}${iv})`;
}

/** A column heading: the label, the percentile under load (`at`, e.g. " p90"), the unit. */
export function heading(m, at = "") {
  return `<th data-metric="${esc(m.name)}" title="${esc(tooltip(m))}">${esc(m.label)}${m.percentile ? esc(at) : ""} <span class="unit">${esc(m.display_unit)}</span></th>`;
}

/** A cell: the figure and, where the metric carries one, its interval. */
export function cell(m, p) {
  const f = formatter(m);
  const iv = m.interval ? span(shown(m, p, "_low"), shown(m, p, "_high"), f) : "";
  return `<td class="m-${esc(m.name)}" data-metric="${esc(m.name)}">${f(shown(m, p))}${iv}</td>`;
}

/** A cell as plain text (the compare table escapes its cells). */
export function cellText(m, p) {
  const f = formatter(m);
  const lo = shown(m, p, "_low");
  const hi = shown(m, p, "_high");
  return f(shown(m, p)) + (m.interval && lo != null && hi != null ? ` (${f(lo)}–${f(hi)})` : "");
}
