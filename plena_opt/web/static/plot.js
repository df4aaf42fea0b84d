// A log-log scatter plot as an SVG string: the studies tab's fronts.

import { fmt } from "./timeline.js";

export const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

/** A measured-error interval ` (lo–hi)` as a muted span formatted by `f` ("" without one). */
export const span = (lo, hi, f) => (lo == null || hi == null ? "" : ` <span class="iv">(${f(lo)}–${f(hi)})</span>`);

const lx = (v) => Math.log10(Math.max(v, 1e-9));

function pad(lo, hi) {
  if (!isFinite(lo) || !isFinite(hi)) return [0, 1];
  const d = Math.max(hi - lo, 0.2) * 0.08;
  return [lo - d, hi + d];
}

/**
 * points: [{x, y, cls, r, title, attrs}] drawn in order (last on top); lines: [{cls, pts: [[x, y]]}].
 * Both axes logarithmic; `under(X, Y, box)` may return SVG drawn below the points (box: the plot
 * area's l, r, t, b in pixels). Returns {svg, X, Y}.
 */
export function scatter({ id, points, lines = [], xlabel, ylabel, W = 860, H = 520, under = null }) {
  const M = { l: 70, r: 20, t: 30, b: 50 };
  const xs = points.map((p) => lx(p.x));
  const ys = points.map((p) => lx(p.y));
  const [x0, x1] = pad(Math.min(...xs), Math.max(...xs));
  const [y0, y1] = pad(Math.min(...ys), Math.max(...ys));
  const X = (v) => M.l + ((lx(v) - x0) / (x1 - x0)) * (W - M.l - M.r);
  const Y = (v) => H - M.b - ((lx(v) - y0) / (y1 - y0)) * (H - M.t - M.b);
  const ticks = (lo, hi, f2) => {
    // 1-2-3-5 per decade; a narrow range gets every integer mantissa, then its own ends
    const at = (ms) => {
      const vs = [];
      for (let e = Math.floor(lo); e <= Math.ceil(hi); e++) for (const m of ms) {
        const v = m * 10 ** e;
        if (lx(v) >= lo && lx(v) <= hi) vs.push(v);
      }
      return vs;
    };
    let vs = at([1, 2, 3, 5]);
    if (vs.length < 2) vs = at([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    if (vs.length < 2) vs = [10 ** (lo + (hi - lo) * 0.1), 10 ** (hi - (hi - lo) * 0.1)].map((v) => +v.toPrecision(2));
    return vs.map(f2).join("");
  };
  const xt = ticks(x0, x1, (v) => `<text x="${X(v)}" y="${H - M.b + 18}" text-anchor="middle">${fmt(v)}</text><line class="grid" x1="${X(v)}" x2="${X(v)}" y1="${M.t}" y2="${H - M.b}"/>`);
  const yt = ticks(y0, y1, (v) => `<text x="${M.l - 8}" y="${Y(v) + 4}" text-anchor="end">${fmt(v)}</text><line class="grid" x1="${M.l}" x2="${W - M.r}" y1="${Y(v)}" y2="${Y(v)}"/>`);
  const poly = lines.map((l) => `<polyline class="${l.cls}" points="${l.pts.map(([x, y]) => `${X(x)},${Y(y)}`).join(" ")}"/>`).join("");
  const dots = points
    .map((p) => {
      const attrs = Object.entries(p.attrs || {}).map(([k, v]) => ` ${k}="${esc(v)}"`).join("");
      return `<circle class="pt ${p.cls}"${attrs} cx="${X(p.x)}" cy="${Y(p.y)}" r="${p.r}"><title>${esc(p.title)}</title></circle>`;
    })
    .join("");
  const my = (H - M.b + M.t) / 2;
  const shade = under ? under(X, Y, { l: M.l, r: W - M.r, t: M.t, b: H - M.b }) : "";
  const svg = `<svg id="${id}" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}">${shade}${xt}${yt}${poly}${dots}
      <text x="${(W + M.l) / 2}" y="${H - 10}" text-anchor="middle" class="axis-title">${esc(xlabel)}</text>
      <text x="16" y="${my}" text-anchor="middle" class="axis-title" transform="rotate(-90 16 ${my})">${esc(ylabel)}</text>
    </svg>`;
  return { svg, X, Y };
}

/**
 * The 2-D frontier of [x, y] pairs (y maximised; x maximised when xMax, else minimised), sorted
 * by x: the line a front is read along once its other objectives are projected away.
 */
export function envelope(pts, xMax) {
  const s = [...pts].sort((a, b) => (xMax ? b[0] - a[0] : a[0] - b[0]) || b[1] - a[1]);
  const out = [];
  let best = -Infinity;
  for (const p of s) if (p[1] > best) { out.push(p); best = p[1]; }
  return out.sort((a, b) => a[0] - b[0]);
}
