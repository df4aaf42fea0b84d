// Studies tab: the studies in the store and a study's front (every trial; infeasible greyed).
// Clicking a trial opens its plan in the simulator.

import { api } from "./api.js";
import { fmt } from "./timeline.js";

const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

export async function showStudies(onOpen) {
  const list = document.getElementById("studies");
  let rows;
  try {
    rows = await api.studies();
  } catch (err) {
    list.innerHTML = `<p class="error">${esc(err.message)}</p>`;
    return;
  }
  if (!rows.length) {
    list.innerHTML = `<p class="muted">No studies in the store yet. Run <code>plena-opt search</code> first.</p>`;
    return;
  }
  list.innerHTML = rows
    .map((s) => `<button class="study" data-study="${esc(s.name)}"><b>${esc(s.name)}</b>
      <span class="muted">${s.n_trials} trials · ${esc((s.metric_names || []).join(", "))}</span></button>`)
    .join("");
  for (const b of list.querySelectorAll("button.study")) {
    b.addEventListener("click", () => {
      for (const x of list.querySelectorAll(".active")) x.classList.remove("active");
      b.classList.add("active");
      showFront(b.dataset.study, onOpen);
    });
  }
  list.querySelector("button.study").click();
}

async function showFront(name, onOpen) {
  const box = document.getElementById("front");
  const f = await api.front(name);
  const W = 860;
  const H = 520;
  const M = { l: 70, r: 20, t: 30, b: 50 };
  const xs = f.trials.map((t) => t.ttft_ms);
  const ys = f.trials.map((t) => t.tps);
  const lx = (v) => Math.log10(Math.max(v, 1e-9));
  const [x0, x1] = pad(Math.min(...xs.map(lx)), Math.max(...xs.map(lx)));
  const [y0, y1] = pad(Math.min(...ys.map(lx)), Math.max(...ys.map(lx)));
  const X = (v) => M.l + ((lx(v) - x0) / (x1 - x0)) * (W - M.l - M.r);
  const Y = (v) => H - M.b - ((lx(v) - y0) / (y1 - y0)) * (H - M.t - M.b);
  const front = f.trials.filter((t) => t.on_front).sort((a, b) => a.ttft_ms - b.ttft_ms);
  const line = front.map((t) => `${X(t.ttft_ms)},${Y(t.tps)}`).join(" ");
  // draw infeasible first and the front last, so front points are on top
  const rank = (t) => (!t.feasible ? 0 : t.on_front ? 2 : 1);
  const drawOrder = f.trials.map((t, i) => i).sort((a, b) => rank(f.trials[a]) - rank(f.trials[b]));
  const dots = drawOrder
    .map((i) => {
      const t = f.trials[i];
      const cls = !t.feasible ? "infeasible" : t.on_front ? "front" : "feasible";
      return `<circle class="pt ${cls}" data-trial="${t.number}" data-i="${i}" cx="${X(t.ttft_ms)}" cy="${Y(t.tps)}" r="${t.on_front ? 6 : 4}"><title>${esc(t.label)}
TTFT ${fmt(t.ttft_ms)} ms · ${fmt(t.tps)} tokens/s${t.feasible ? "" : " · infeasible"}</title></circle>`;
    })
    .join("");
  const ticks = (lo, hi, f2) => {
    const out = [];
    for (let e = Math.floor(lo); e <= Math.ceil(hi); e++) for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (lx(v) >= lo && lx(v) <= hi) out.push(f2(v));
    }
    return out.join("");
  };
  const xt = ticks(x0, x1, (v) => `<text x="${X(v)}" y="${H - M.b + 18}" text-anchor="middle">${fmt(v)}</text><line class="grid" x1="${X(v)}" x2="${X(v)}" y1="${M.t}" y2="${H - M.b}"/>`);
  const yt = ticks(y0, y1, (v) => `<text x="${M.l - 8}" y="${Y(v) + 4}" text-anchor="end">${fmt(v)}</text><line class="grid" x1="${M.l}" x2="${W - M.r}" y1="${Y(v)}" y2="${Y(v)}"/>`);
  const n = f.trials.length;
  const bad = f.trials.filter((t) => !t.feasible).length;
  box.innerHTML = `<h3>${esc(f.name)} <span class="muted">${n} trials · ${front.length} on the front · ${bad} infeasible (grey) · click a plan to simulate it</span></h3>
    <svg id="front-svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}">${xt}${yt}
      <polyline class="front-line" points="${line}"/>${dots}
      <text x="${(W + M.l) / 2}" y="${H - 10}" text-anchor="middle" class="axis-title">TTFT (ms, log)</text>
      <text x="16" y="${(H - M.b + M.t) / 2}" text-anchor="middle" class="axis-title" transform="rotate(-90 16 ${(H - M.b + M.t) / 2})">decode tokens/s (log)</text>
    </svg>
    <div class="front-legend"><span><i style="background:var(--accent)"></i>on the front (${esc(f.metric_names.join(", "))})</span>
      <span><i style="background:#8fb0ea"></i>feasible</span><span><i style="background:#c9cdd4"></i>infeasible</span></div>
    <div id="front-note" class="muted"></div>
    <table class="front-table"><thead><tr><th>front plan</th><th>TTFT ms</th><th>tokens/s</th><th>J/token</th></tr></thead><tbody>
    ${front.map((t) => `<tr data-open="${f.trials.indexOf(t)}"><td><a href="#">${esc(t.label)}</a></td><td>${fmt(t.ttft_ms)}</td><td>${fmt(t.tps)}</td><td>${t.energy_j_per_token == null ? "-" : fmt(t.energy_j_per_token)}</td></tr>`).join("")}
    </tbody></table>`;
  for (const tr of box.querySelectorAll("tr[data-open]")) {
    tr.addEventListener("click", (ev) => {
      ev.preventDefault();
      open(f.trials[+tr.dataset.open]);
    });
  }
  for (const c of box.querySelectorAll("circle.pt")) {
    c.addEventListener("click", () => open(f.trials[+c.dataset.i]));
  }

  function open(t) {
    const p = f.problem || {};
    if (f.not_in_form.length) {
      document.getElementById("front-note").textContent =
        `The simulator form cannot show this study's ${f.not_in_form.join(", ")}; simulate it with plena-opt simulate.`;
      return;
    }
    onOpen(p, t.plan);
  }
}

function pad(lo, hi) {
  if (!isFinite(lo) || !isFinite(hi)) return [0, 1];
  const d = Math.max(hi - lo, 0.2) * 0.08;
  return [lo - d, hi + d];
}
