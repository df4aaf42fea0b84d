// Studies tab: a serving comparison study (plena-opt search --serving both|disaggregated).
// Tokens/s per user (x) vs tokens/s per device (y), aggregated and disaggregated deployments
// in two colours, SLA-violating ones grey; the verdict; each mode's front as a table. An
// aggregated plan opens in the simulator; a disaggregated one shows its per-pool commands.

import { api } from "./api.js";
import { envelope, esc, scatter } from "./plot.js";
import { fmt } from "./timeline.js";

const MODES = ["aggregated", "disaggregated"];
const SHORT = { aggregated: "agg", disaggregated: "disagg" };

const ms = (s) => (s == null ? "-" : fmt(s * 1e3));

function slaText(sla) {
  const parts = [];
  if (sla.max_ttft_seconds != null) parts.push(`TTFT ≤ ${fmt(sla.max_ttft_seconds * 1e3)} ms`);
  if (sla.max_tpot_seconds != null) parts.push(`TPOT ≤ ${fmt(sla.max_tpot_seconds * 1e3)} ms`);
  if (sla.min_tps_per_seq != null) parts.push(`≥ ${fmt(sla.min_tps_per_seq)} tokens/s per user`);
  return parts.join(", ") || "no SLA";
}

const pools = (t) =>
  t.pools
    .map((p) => `${p.role === "aggregated" ? "" : `${p.workers}× ${p.role} `}[${esc(p.label)}] ${p.devices_per_worker} dev`)
    .join(" + ");

function point(t, i) {
  const cls = t.meets_sla ? SHORT[t.serving] : "violates";
  return {
    x: t.tps_per_user, y: t.tps_per_device, cls: `${cls}${t.on_front ? " on-front" : ""}`,
    r: t.on_front ? 6 : 4, attrs: { "data-i": i, "data-mode": t.serving, "data-meets": t.meets_sla ? "1" : "0" },
    title: `${t.label} (${t.serving}, ${t.devices} devices)\nTTFT ${ms(t.ttft_seconds)} ms · TPOT ${ms(t.tpot_seconds)} ms\n` +
      `${fmt(t.tps_per_device)} tokens/s/device · ${fmt(t.tps_per_user)} tokens/s/user${t.meets_sla ? "" : " · misses the SLA"}`,
  };
}

function table(s, mode) {
  const rows = s.trials.map((t, i) => [t, i]).filter(([t]) => t.serving === mode && t.on_front)
    .sort(([a], [b]) => b.tps_per_device - a.tps_per_device);
  if (!rows.length) return "";
  const m = s.modes.find((x) => x.mode === mode);
  return `<h4><i class="dot ${SHORT[mode]}"></i>${mode} front <span class="muted">${rows.length} of ${m.n_trials} deployments · ${m.n_meeting_sla} meet the SLA</span></h4>
    <table class="front-table serving-table" data-mode="${mode}"><thead><tr><th>deployment <span class="muted">(model, under load)</span></th><th>TTFT ms</th><th>TPOT ms</th><th>tokens/s/device</th><th>tokens/s/user</th><th>pools</th></tr></thead><tbody>
    ${rows.map(([t, i]) => `<tr data-open="${i}"><td><a href="#">${esc(t.label)}</a></td><td>${ms(t.ttft_seconds)}</td><td>${ms(t.tpot_seconds)}</td><td>${fmt(t.tps_per_device)}</td><td>${fmt(t.tps_per_user)}</td><td>${pools(t)}</td></tr>`).join("")}
    </tbody></table>`;
}

export async function showServing(name, onOpen) {
  const box = document.getElementById("front");
  const s = await api.serving(name);
  if (!s.trials.length) {
    box.innerHTML = `<h3>${esc(s.name)}</h3><p class="muted">This serving comparison has no deployments.</p>`;
    return;
  }
  // SLA-violating first, then each mode's rest, its front last (on top)
  const rank = (t) => (!t.meets_sla ? 0 : t.on_front ? 2 : 1);
  const order = s.trials.map((t, i) => i).sort((a, b) => rank(s.trials[a]) - rank(s.trials[b]));
  const lines = MODES.map((mode) => ({
    cls: `front-line ${SHORT[mode]}`,
    pts: envelope(s.trials.filter((t) => t.serving === mode && t.meets_sla)
      .map((t) => [t.tps_per_user, t.tps_per_device]), true),
  }));
  const { svg } = scatter({
    id: "front-svg", points: order.map((i) => point(s.trials[i], i)), lines,
    xlabel: "tokens/s per user (1 / TPOT, log)", ylabel: "tokens/s per device (log)",
  });
  const count = (m) => s.trials.filter((t) => t.serving === m).length;
  const grey = s.trials.filter((t) => !t.meets_sla).length;
  const verdict = s.verdict || (s.winner ? `${s.winner} wins` : "no verdict (one mode only, or stopped)");
  box.innerHTML = `<h3>${esc(s.name)} <span class="muted">serving comparison of ${esc(s.serving_comparison_of)} · SLA ${esc(slaText(s.sla))}</span></h3>
    <p id="serving-verdict" class="verdict" data-winner="${esc(s.winner || "")}">${esc(verdict)}</p>
    ${svg}
    <div class="front-legend"><span><i class="dot agg"></i>aggregated (${count("aggregated")})</span>
      <span><i class="dot disagg"></i>disaggregated (${count("disaggregated")})</span>
      <span><i class="dot violates"></i>misses the SLA (${grey})</span><span>large: on its mode's front · dashed: its best tokens/s/device at each speed per user · click a plan</span></div>
    <div id="front-note" class="muted"></div>
    ${MODES.map((m) => table(s, m)).join("")}`;
  for (const tr of box.querySelectorAll("tr[data-open]")) {
    tr.addEventListener("click", (ev) => {
      ev.preventDefault();
      open(s.trials[+tr.dataset.open]);
    });
  }
  for (const c of box.querySelectorAll("circle.pt")) {
    c.addEventListener("click", () => open(s.trials[+c.dataset.i]));
  }

  function open(t) {
    const note = document.getElementById("front-note");
    if (t.serving === "disaggregated") {
      note.innerHTML = `<b>${esc(t.label)}</b> is a disaggregated deployment; the simulator form simulates one
        aggregated plan, so simulate each pool's worker with:
        ${t.simulate_commands.map((c) => `<pre class="cmd">${esc(c)}</pre>`).join("")}`;
      return;
    }
    if (s.not_in_form.length) {
      note.textContent = `The simulator form cannot show this study's ${s.not_in_form.join(", ")}; simulate it with plena-opt simulate.`;
      return;
    }
    onOpen(s.problem, t.plan);
  }
}
