// Timeline of SimulationResult.ops: one lane per rank (plus its comm lane), compute rectangles
// coloured by op type and chunk, wait gaps drawn separately before each op, critical path.
// Virtualised DOM: only ops within one viewport either side of the view are elements; panning
// moves one layer with a CSS transform and re-renders only when the view leaves that window.

const LANE_H = 30;
const GUTTER = 96;
const AXIS_H = 22;

const PALETTE = {
  F: 212, B: 28, I: 28, W: 142, VF: 268, VB: 330, GF: 175, GB: 52,
  P: 200, D0: 285, D: 95,
};
/** Serving hops have their own colours (a prefill hop and a decode hop must differ). */
const COMM_COLOUR = { XP: "hsl(200 28% 38%)", XD: "hsl(95 22% 62%)" };

/** What each op type stands for (the legend's words). */
export const OP_NAMES = {
  F: "forward", B: "backward", I: "input gradient", W: "weight gradient",
  VF: "forward (virtual chunk)", VB: "backward (virtual chunk)", GF: "forward", GB: "backward",
  P: "prefill", D0: "first decode step (first token)", D: "decode step",
  XP: "prefill activation hop to the next stage", XD: "decode activation hop to the next stage",
  XF: "forward activation send", XB: "backward gradient send",
};

/** Colour of an op: hue by op type (its letters; D0 apart from D), lightness by chunk. */
export function colour(opType, chunk, kind) {
  const stripped = opType.replace(/_s\d+$/, "");
  if (kind === "COMM") return COMM_COLOUR[stripped] || `hsl(0 0% ${62 - 8 * (chunk % 3)}%)`;
  const base = stripped in PALETTE ? stripped : stripped.replace(/\d+$/, "");
  let hue = PALETTE[base];
  if (hue === undefined) hue = [...base].reduce((h, c) => (h * 31 + c.charCodeAt(0)) % 360, 7);
  const light = 52 + 12 * (chunk % 3);
  return `hsl(${hue} 62% ${light}%)`;
}

export class Timeline {
  constructor(root, { onHover, onSelect }) {
    this.root = root;
    this.onHover = onHover;
    this.onSelect = onSelect;
    root.innerHTML = "";
    this.gutter = el("div", "tl-gutter");
    this.view = el("div", "tl-view");
    this.axis = el("div", "tl-axis");
    this.layer = el("div", "tl-layer");
    this.view.append(this.axis, this.layer);
    root.append(this.gutter, this.view);
    this.t0 = 0;
    this.px = 1;
    this.selected = -1;
    this.showCrit = false;
    this.rendered = null;
    this.pending = false;
    this.bind();
  }

  /** Show ops (static data) with one timeline (start/end/... arrays). */
  setData(ops, tl) {
    this.ops = ops;
    this.tl = tl;
    const n = ops.name.length;
    const hasComm = new Set();
    for (let j = 0; j < n; j++) if (ops.lane[j] === "comm") hasComm.add(ops.rank[j]);
    const ranks = Math.max(...ops.rank) + 1;
    this.laneOf = new Map();
    const labels = [];
    for (let r = 0; r < ranks; r++) {
      this.laneOf.set(`${r}/compute`, labels.length);
      labels.push(`rank ${r}`);
      if (hasComm.has(r)) {
        this.laneOf.set(`${r}/comm`, labels.length);
        labels.push(`rank ${r} comm`);
      }
    }
    this.lane = new Int32Array(n);
    for (let j = 0; j < n; j++) this.lane[j] = this.laneOf.get(`${ops.rank[j]}/${ops.lane[j]}`);
    this.nLanes = labels.length;
    this.gutter.innerHTML = labels
      .map((l, i) => `<div class="tl-lane-label" style="top:${AXIS_H + i * LANE_H}px">${l}</div>`)
      .join("");
    const h = AXIS_H + this.nLanes * LANE_H + 4;
    this.root.style.height = `${h}px`;
    this.crit = new Set(tl.critical_path);
    this.colours = ops.op_type.map((t, j) => colour(t, ops.chunk[j], ops.kind[j]));
    this.legend = legend(ops, this.colours);
    this.order = Array.from({ length: n }, (_, j) => j).sort((a, b) => tl.start[a] - tl.start[b]);
    this.maxDur = 0;
    for (let j = 0; j < n; j++) {
      this.maxDur = Math.max(this.maxDur, tl.end[j] - tl.rank_free_at[j]);
    }
    this.fit();
  }

  get width() {
    return Math.max(this.view.clientWidth, 100);
  }

  fit() {
    const span = Math.max(this.tl.makespan, 1e-9);
    this.px = (this.width - 8) / span;
    this.t0 = -4 / this.px;
    this.render(true);
  }

  zoom(factor, atX = this.width / 2) {
    const t = this.t0 + atX / this.px;
    const min = (this.width - 8) / Math.max(this.tl.makespan, 1e-9) / 4;
    this.px = Math.min(Math.max(this.px * factor, min), 1e9);
    this.t0 = t - atX / this.px;
    this.schedule(true);
  }

  panBy(dxPx) {
    this.t0 -= dxPx / this.px;
    this.schedule(false);
  }

  /** Centre the view on op j (zooming in if it is narrower than a few pixels). */
  reveal(j) {
    const s = this.tl.start[j];
    const e = this.tl.end[j];
    if ((e - s) * this.px < 24) this.px = Math.min(24 / Math.max(e - s, 1e-9), 1e9);
    this.t0 = (s + e) / 2 - this.width / 2 / this.px;
    this.render(true);
  }

  select(j) {
    this.selected = j;
    for (const x of this.layer.querySelectorAll(".sel")) x.classList.remove("sel");
    const node = this.layer.querySelector(`[data-i="${j}"].op`);
    if (node) node.classList.add("sel");
  }

  setCritical(on) {
    this.showCrit = on;
    this.layer.classList.toggle("crit-mode", on);
  }

  schedule(full) {
    this.fullPending = this.fullPending || full;
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      const full = this.fullPending;
      this.fullPending = false;
      this.render(full);
    });
  }

  /** Draw: re-build elements if zoom changed or the view left the rendered window. */
  render(full) {
    const w = this.width / this.px;
    const a = this.t0;
    const b = this.t0 + w;
    const r = this.rendered;
    if (full || !r || r.px !== this.px || a < r.lo || b > r.hi) this.build(a - w, b + w);
    // panning inside the rendered window only moves the layer (ticks included)
    this.layer.style.transform = `translateX(${(this.rendered.lo - this.t0) * this.px}px)`;
  }

  build(lo, hi) {
    const { ops, tl } = this;
    const px = this.px;
    const out = [];
    // ops sorted by start; an op or wait spans at most maxDur (= max end − rank_free_at)
    const order = this.order;
    let i = lowerBound(order, (j) => tl.start[j] >= lo - this.maxDur);
    for (; i < order.length; i++) {
      const j = order[i];
      const s = tl.start[j];
      if (s - this.maxDur > hi) break; // later ops and their waits start after hi
      const e = tl.end[j];
      const top = AXIS_H + this.lane[j] * LANE_H + 3;
      const f = tl.rank_free_at[j];
      if (s > f && s >= lo && f <= hi) {
        const x = (f - lo) * px;
        out.push(
          `<div class="wait" data-wait="${ops.name[j]}" data-i="${j}" style="left:${x}px;` +
            `width:${(s - f) * px}px;top:${top}px"></div>`,
        );
      }
      if (e < lo || s > hi) continue;
      const x = (s - lo) * px;
      const wpx = (e - s) * px;
      const cls = `op${this.crit.has(j) ? " crit" : ""}${j === this.selected ? " sel" : ""}`;
      const text = wpx > 8 * ops.label[j].length ? ops.label[j] : "";
      out.push(
        `<div class="${cls}" data-op="${ops.name[j]}" data-i="${j}" style="left:${x}px;` +
          `width:${wpx}px;top:${top}px;background:${this.colours[j]}">${text}</div>`,
      );
    }
    const step = niceStep(this.width / px / 8);
    for (let t = Math.ceil(Math.max(lo, 0) / step) * step; t <= hi; t += step) {
      out.push(`<span class="tick" style="left:${(t - lo) * px}px">${fmt(t)} ms</span>`);
    }
    this.layer.innerHTML = out.join("");
    // a sized, contained layer: moving it never re-lays out its thousands of children
    this.layer.style.width = `${(hi - lo) * px}px`;
    this.layer.style.height = `${AXIS_H + this.nLanes * LANE_H + 4}px`;
    this.layer.classList.toggle("crit-mode", this.showCrit);
    this.rendered = { lo, hi, px };
  }

  bind() {
    let drag = null;
    this.view.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const rect = this.view.getBoundingClientRect();
      if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) {
        this.panBy(-(ev.deltaX || ev.deltaY));
      } else {
        this.zoom(Math.exp(-ev.deltaY * 0.002), ev.clientX - rect.left);
      }
    }, { passive: false });
    this.view.addEventListener("pointerdown", (ev) => {
      drag = { x: ev.clientX, moved: false };
      this.view.setPointerCapture(ev.pointerId);
    });
    this.view.addEventListener("pointermove", (ev) => {
      if (drag) {
        const dx = ev.clientX - drag.x;
        if (Math.abs(dx) > 2) drag.moved = true;
        if (drag.moved) {
          drag.x = ev.clientX;
          this.panBy(dx);
          return;
        }
      }
      const target = document.elementFromPoint(ev.clientX, ev.clientY);
      const j = target && target.dataset && target.dataset.i !== undefined ? +target.dataset.i : -1;
      this.onHover(j, ev, target && target.classList.contains("wait"));
    });
    this.view.addEventListener("pointerleave", () => this.onHover(-1));
    // keyboard: arrows pan, + / - zoom, 0 fits
    this.view.tabIndex = 0;
    this.view.addEventListener("keydown", (ev) => {
      const step = this.width / 8;
      const keys = {
        ArrowLeft: () => this.panBy(step), ArrowRight: () => this.panBy(-step),
        "+": () => this.zoom(1.5), "=": () => this.zoom(1.5), "-": () => this.zoom(1 / 1.5),
        0: () => this.fit(),
      };
      if (keys[ev.key]) {
        ev.preventDefault();
        keys[ev.key]();
      }
    });
    this.view.addEventListener("pointerup", (ev) => {
      const moved = drag && drag.moved;
      drag = null;
      if (moved) return;
      const target = document.elementFromPoint(ev.clientX, ev.clientY);
      if (target && target.dataset && target.dataset.i !== undefined) {
        this.onSelect(+target.dataset.i);
      }
    });
    new ResizeObserver(() => this.tl && this.render(true)).observe(this.view);
  }
}

/** Swatches: one per (op type, chunk) drawn, then the wait gap and the critical path. */
function legend(ops, colours) {
  const seen = new Map();
  ops.op_type.forEach((t, j) => {
    const type = t.replace(/_s\d+$/, ""); // serving: one swatch per kind, not per stage
    const key = ops.chunk[j] > 0 && ops.kind[j] !== "P" ? `${type} chunk ${ops.chunk[j]}` : type;
    if (!seen.has(key)) seen.set(key, colours[j]);
  });
  const named = (k) => {
    const name = OP_NAMES[k.split(" ")[0]];
    return name ? `<b>${k}</b> ${name}${k.includes(" chunk") ? k.slice(k.indexOf(" chunk")) : ""}` : k;
  };
  const items = [...seen].slice(0, 24).map(([k, c]) => `<span><i style="background:${c}"></i>${named(k)}</span>`);
  items.push(`<span><i class="lg-wait"></i>wait gap</span>`);
  items.push(`<span><i class="lg-crit"></i>critical path</span>`);
  return items.join("");
}

function lowerBound(arr, pred) {
  let lo = 0;
  let hi = arr.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (pred(arr[mid])) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

function niceStep(x) {
  const p = 10 ** Math.floor(Math.log10(Math.max(x, 1e-12)));
  const m = x / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

export function fmt(v) {
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1000) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1).replace(/\.0$/, "");
  if (a >= 0.01) return v.toFixed(3).replace(/\.?0+$/, "");
  return v.toExponential(2);
}

function el(tag, cls) {
  const x = document.createElement(tag);
  x.className = cls;
  return x;
}
