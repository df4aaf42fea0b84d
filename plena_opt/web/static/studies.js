// Studies tab: the studies in the store and a study's front (every trial; infeasible greyed).
// Clicking a trial opens its plan in the simulator. A serving comparison study is drawn by
// serving.js.

import { api } from "./api.js";
import { envelope, esc, scatter } from "./plot.js";
import { showServing } from "./serving.js";
import { fmt } from "./timeline.js";

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
    .map((s) => `<button class="study" data-study="${esc(s.name)}" data-kind="${esc(s.kind)}"><b>${esc(s.name)}</b>
      <span class="muted">${s.n_trials} trials · ${esc((s.metric_names || []).join(", "))}</span></button>`)
    .join("");
  for (const b of list.querySelectorAll("button.study")) {
    b.addEventListener("click", () => {
      for (const x of list.querySelectorAll(".active")) x.classList.remove("active");
      b.classList.add("active");
      if (b.dataset.kind === "serving") showServing(b.dataset.study, onOpen);
      else showFront(b.dataset.study, onOpen);
    });
  }
  list.querySelector("button.study").click();
}

async function showFront(name, onOpen) {
  const box = document.getElementById("front");
  const f = await api.front(name);
  // the axes of plena-opt search --plot: with an SLA, per-user speed vs per-device throughput
  const perDevice = f.view === "per-user-per-device";
  const fx = perDevice ? (t) => t.tps_per_user : (t) => t.ttft_ms;
  const fy = perDevice ? (t) => t.tps_per_device : (t) => t.tps;
  const front = f.trials.filter((t) => t.on_front).sort((a, b) => fx(a) - fx(b));
  // draw infeasible first and the front last, so front points are on top
  const rank = (t) => (!t.feasible ? 0 : t.on_front ? 2 : 1);
  const drawOrder = f.trials.map((t, i) => i).sort((a, b) => rank(f.trials[a]) - rank(f.trials[b]));
  const points = drawOrder.map((i) => {
    const t = f.trials[i];
    const cls = !t.feasible ? "infeasible" : t.on_front ? "front" : "feasible";
    const per = t.tps_per_device == null ? "" : ` · ${fmt(t.tps_per_device)} tokens/s/device · ${fmt(t.tps_per_user)} tokens/s/user`;
    return {
      x: fx(t), y: fy(t), cls, r: t.on_front ? 6 : 4, attrs: { "data-trial": t.number, "data-i": i },
      title: `${t.label}\nTTFT ${fmt(t.ttft_ms)} ms · ${fmt(t.tps)} tokens/s${per}${t.feasible ? "" : " · infeasible"}`,
    };
  });
  const { svg } = scatter({
    id: "front-svg", points,
    lines: [{ cls: "front-line", pts: envelope(front.map((t) => [fx(t), fy(t)]), perDevice) }],
    xlabel: perDevice ? "tokens/s per user (1 / TPOT, log)" : "TTFT (ms, log)",
    ylabel: perDevice ? "tokens/s per device (log)" : "decode tokens/s (log)",
  });
  const n = f.trials.length;
  const bad = f.trials.filter((t) => !t.feasible).length;
  const sla = f.sla_constraints.length ? ` · SLA ${esc(f.sla_constraints.join(", "))}` : "";
  box.innerHTML = `<h3>${esc(f.name)} <span class="muted">${n} trials · ${front.length} on the front · ${bad} infeasible (grey)${sla} · click a plan to simulate it</span></h3>
    ${svg}
    <div class="front-legend"><span><i style="background:var(--accent)"></i>on the front (${esc(f.metric_names.join(", "))})</span>
      <span><i style="background:#8fb0ea"></i>feasible</span><span><i style="background:#c9cdd4"></i>infeasible</span></div>
    <div id="front-note" class="muted"></div>
    <table class="front-table"><thead><tr><th>front plan <span class="muted">(model, static batch)</span></th><th>TTFT ms</th><th>tokens/s</th><th>tokens/s/device</th><th>tokens/s/user</th><th>J/token</th></tr></thead><tbody>
    ${front.map((t) => `<tr data-open="${f.trials.indexOf(t)}"><td><a href="#">${esc(t.label)}</a></td><td>${fmt(t.ttft_ms)}</td><td>${fmt(t.tps)}</td><td>${t.tps_per_device == null ? "-" : fmt(t.tps_per_device)}</td><td>${fmt(t.tps_per_user)}</td><td>${t.energy_j_per_token == null ? "-" : fmt(t.energy_j_per_token)}</td></tr>`).join("")}
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
