// Text panels: run summary, hover card, the selected op's explanation, Monte Carlo figures.

import { fmt } from "./timeline.js";

const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

export function summary(res, tl) {
  const idle = tl.rank_idle.map(fmt).join(", ");
  const a = res.analytic;
  const ana = a
    ? `<div><b>TTFT</b> ${fmt(a.ttft_ms)} ms analytic · ${fmt(a.simulated_ttft_ms)} ms simulated</div>
       <div><b>TPS</b> ${fmt(a.tps)} analytic · ${fmt(a.simulated_tps)} simulated</div>`
    : "";
  const notes = res.notes.map((n) => `<li>${esc(n)}</li>`).join("");
  return `<div class="sum-title">${esc(res.title)} <span class="muted">${res.n_ops} ops${res.simulate_comm ? " · communication simulated" : ""}</span></div>
    <div class="sum-grid">
      <div><b>makespan</b> <span id="makespan">${fmt(tl.makespan)}</span> ms <span class="muted">(${esc(tl.sample)})</span></div>
      <div><b>bubble ratio</b> ${tl.bubble_ratio.toFixed(4)} <span class="muted">share ${tl.bubble_share.toFixed(4)}</span></div>
      <div><b>waits</b> <span id="n-waits">${tl.n_waits}</span> · <b>critical path</b> ${tl.critical_path.length} ops</div>
      <div><b>idle per rank</b> ${idle} ms</div>
      ${ana}
    </div>${notes ? `<ul class="notes">${notes}</ul>` : ""}`;
}

function where(ops, j) {
  return `${esc(ops.label[j])} on rank ${ops.rank[j]}`;
}

export function hoverCard(ops, tl, j, isWait) {
  const wait = tl.start[j] - tl.rank_free_at[j];
  const step = ops.step[j] >= 0 ? ` · step ${ops.step[j]}` : "";
  const head = isWait ? `wait before ${esc(ops.label[j])}` : esc(ops.label[j]);
  return `<b>${head}</b><div class="mono">${esc(ops.name[j])}</div>
    <div>rank ${ops.rank[j]} · chunk ${ops.chunk[j]} · micro-batch ${ops.microbatch[j]}${step} · ${esc(ops.op_type[j])}</div>
    <div>start ${fmt(tl.start[j])} · end ${fmt(tl.end[j])} · duration ${fmt(tl.end[j] - tl.start[j])} ms</div>
    <div>wait ${fmt(wait)} ms</div>`;
}

/** Why op j started when it did: the binding dependency in words, then every dependency. */
export function explain(ops, tl, j) {
  const deps = ops.deps[j];
  const b = tl.binding[j];
  const wait = tl.start[j] - tl.rank_free_at[j];
  let why;
  if (b < 0) {
    why = "It has no dependencies: it started at time 0.";
  } else {
    const [src, ri] = deps[b];
    const reason = ops.reason_text[ops.reasons[ri]];
    const link = `<a href="#" class="jump" data-jump="${src}">${where(ops, src)}</a>`;
    why = wait > 0
      ? `Waited ${fmt(wait)} ms for ${link}: ${esc(reason)}.`
      : `Did not wait: it started when ${link} ended (${esc(reason)}).`;
  }
  const rows = deps
    .map(([src, ri], k) => {
      const slack = tl.start[j] - tl.end[src];
      return `<tr class="${k === b ? "binding" : ""}"><td><a href="#" class="jump" data-jump="${src}">${esc(ops.label[src])}</a></td>
        <td>rank ${ops.rank[src]}</td><td>${esc(ops.reason_text[ops.reasons[ri]])}<small>${esc(ops.reasons[ri])}</small></td>
        <td>ended ${fmt(tl.end[src])} ms</td><td>slack ${fmt(slack)} ms</td></tr>`;
    })
    .join("");
  return `<h3>${esc(ops.label[j])} <span class="mono muted">${esc(ops.name[j])}</span></h3>
    <p class="why" id="why">${why}</p>
    <p class="muted">start ${fmt(tl.start[j])} ms = max(ready ${fmt(tl.ready_at[j])}, rank free ${fmt(tl.rank_free_at[j])}) · duration ${fmt(tl.end[j] - tl.start[j])} ms</p>
    <table class="deps"><thead><tr><th>dependency</th><th></th><th>reason</th><th></th><th></th></tr></thead><tbody>${rows}</tbody></table>`;
}

export function monteCarlo(res, tl) {
  const mc = res.monte_carlo;
  const bubbles = tl.rank_bubble_ratio
    .map((v, r) => bar(`rank ${r}`, v, Math.max(...tl.rank_bubble_ratio, 1e-9), v.toFixed(3)))
    .join("");
  let out = `<h3>Bubble ratio per rank <span class="muted">(${esc(tl.sample)}: idle / busy)</span></h3>${bubbles}`;
  if (!mc) return out + `<p class="muted">No Monte Carlo samples (samples = 0).</p>`;
  const rows = mc.quantiles
    .map((q) => `<tr><td>${esc(q.metric)}</td><td>${esc(q.unit)}</td>
      <td>${fmt(q.mean)} <small>[${fmt(q.mean_ci[0])}, ${fmt(q.mean_ci[1])}]</small></td>
      <td>${fmt(q.p50)} <small>[${fmt(q.p50_ci[0])}, ${fmt(q.p50_ci[1])}]</small></td>
      <td>${fmt(q.p90)} <small>[${fmt(q.p90_ci[0])}, ${fmt(q.p90_ci[1])}]</small></td>
      <td>${fmt(q.p99)} <small>[${fmt(q.p99_ci[0])}, ${fmt(q.p99_ci[1])}]</small></td></tr>`)
    .join("");
  const crit = Object.entries(mc.criticality_by_type)
    .sort((a, b) => b[1] - a[1])
    .map(([t, v]) => bar(t, v, 1, `${(100 * v).toFixed(1)} %`))
    .join("");
  return `<h3>Monte Carlo <span class="muted">${mc.n_samples} samples · seed ${mc.seed} · 95 % CIs</span></h3>
    <table class="quant" id="quantiles"><thead><tr><th></th><th></th><th>mean</th><th>p50</th><th>p90</th><th>p99</th></tr></thead><tbody>${rows}</tbody></table>
    <h3>Criticality <span class="muted">(share of samples an op type is on the critical path)</span></h3>${crit}${out}`;
}

function bar(label, v, max, text) {
  const w = Math.max(0, Math.min(100, (100 * v) / max));
  return `<div class="bar"><span class="bar-l">${esc(label)}</span><span class="bar-t"><span style="width:${w}%"></span></span><span class="bar-v">${text}</span></div>`;
}
