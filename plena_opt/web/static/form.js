// The simulator's form: training schedule or serving plan, duration inputs only for the op
// types the selected schedule (or serving plan) uses, noise and samples.

import { api } from "./api.js";

const $ = (id) => document.getElementById(id);
const num = (id) => Number($(id).value);

const DEFAULT_MS = { F: 1, B: 2, I: 1, W: 1, VF: 0.5, VB: 1, GF: 0.5, GB: 1, XF: 0.1, XB: 0.1 };

export class SimForm {
  constructor(catalog, onSubmit) {
    this.catalog = catalog;
    this.values = {}; // last value typed per op type, kept across schedule changes
    this.estimate = null;
    fill($("schedule"), Object.keys(catalog.schedules), "1f1b");
    fill($("model"), catalog.models, catalog.defaults.model);
    fill($("noc"), catalog.nocs, catalog.defaults.noc);
    fill($("memory"), catalog.memories, catalog.defaults.memory.replaceAll("_", "-"));
    fill($("chip"), ["", ...catalog.chips], "");
    $("chip").options[0].textContent = "default PLENA chip";
    $("form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      onSubmit(this.request());
    });
    for (const x of document.querySelectorAll('input[name="mode"]')) {
      x.addEventListener("change", () => this.modeChanged());
    }
    $("schedule").addEventListener("change", () => this.renderDurations());
    $("simulate-comm").addEventListener("change", () => this.renderDurations());
    for (const id of ["model", "noc", "chip", "memory", "s-tp", "s-ep", "s-dp", "s-pp", "s-cp", "s-moe", "s-moe-tp", "s-overlap",
      "batch", "input-seq", "output-seq", "window-steps"]) {
      $(id).addEventListener("change", () => this.refreshEstimate());
    }
    $("chip").addEventListener("change", () => {
      $("memory").disabled = (catalog.gpu_chips || []).includes($("chip").value);
    });
    this.renderDurations();
  }

  get mode() {
    return document.querySelector('input[name="mode"]:checked').value;
  }

  modeChanged() {
    const serving = this.mode === "serving";
    $("training-fields").hidden = serving;
    $("serving-fields").hidden = !serving;
    $("dur-unit").textContent = serving ? "ms per op (from the estimate)" : "ms per stage";
    $("simulate-comm").checked = serving;
    if (serving) this.refreshEstimate();
    else this.renderDurations();
  }

  /** Op types whose duration the selected schedule / serving plan needs. */
  opTypes() {
    const comm = $("simulate-comm").checked;
    if (this.mode === "serving") {
      if (!this.estimate) return [];
      return Object.keys(this.estimate.durations_ms).filter((k) => comm || !k.startsWith("X"));
    }
    const s = this.catalog.schedules[$("schedule").value];
    $("vpp").disabled = !s.chunked;
    if (!s.chunked) $("vpp").value = 1;
    else if (num("vpp") < 2) $("vpp").value = 2;
    return comm ? [...s.op_types, ...s.comm_op_types] : s.op_types;
  }

  renderDurations() {
    this.saveValues();
    const box = $("durations");
    const types = this.opTypes();
    const serving = this.mode === "serving";
    box.classList.toggle("serving", serving); // two columns: estimate values are long
    box.innerHTML = types
      .map((t) => {
        const v = serving ? this.estimate.durations_ms[t] : (this.values[t] ?? DEFAULT_MS[t] ?? 1);
        const shown = serving ? +v.toPrecision(6) : v;
        return `<label title="${t}">${t}<input type="number" step="any" min="0" ` +
          `data-op-type="${t}" data-shown="${shown}" value="${shown}"></label>`;
      })
      .join("");
  }

  saveValues() {
    if (this.mode !== "training") return;
    for (const x of document.querySelectorAll("#durations input[data-op-type]")) {
      this.values[x.dataset.opType] = Number(x.value);
    }
  }

  servingFields() {
    return {
      model: $("model").value,
      noc: $("noc").value,
      memory: $("memory").value,
      chip: $("chip").value || undefined,
      tp: num("s-tp"), ep: num("s-ep"), dp: num("s-dp"), pp: num("s-pp"), cp: num("s-cp"),
      moe_tp_mode: $("s-moe").value,
      moe_tp: num("s-moe-tp"),
      comm_overlap: $("s-overlap").value,
      batch_size: num("batch"),
      input_seq: num("input-seq"),
      output_seq: num("output-seq"),
      max_window_steps: num("window-steps"),
    };
  }

  async refreshEstimate() {
    const out = $("estimate");
    try {
      this.estimate = await api.estimate(this.servingFields());
      const e = this.estimate;
      out.textContent = `estimate: TTFT ${e.ttft_ms.toFixed(1)} ms · ${e.tps.toFixed(1)} tokens/s · ` +
        `${e.micro_batches} micro-batches`;
      out.classList.remove("bad");
    } catch (err) {
      this.estimate = null;
      out.textContent = `${err.field ? err.field + ": " : ""}${err.message}`;
      out.classList.add("bad");
    }
    this.renderDurations();
  }

  /** Duration inputs; for a serving plan only those the user changed (the rest stay the
   * estimate's exact values, not their rounded display). */
  durations() {
    const d = {};
    const serving = this.mode === "serving";
    for (const x of document.querySelectorAll("#durations input[data-op-type]")) {
      if (serving && x.value === x.dataset.shown) continue;
      d[x.dataset.opType] = Number(x.value);
    }
    return d;
  }

  request() {
    const req = {
      mode: this.mode,
      noise: $("noise").value,
      samples: num("samples"),
      seed: num("seed"),
      simulate_comm: $("simulate-comm").checked,
    };
    if (this.mode === "training") {
      req.training = {
        schedule: $("schedule").value,
        pp: num("pp"),
        vpp: num("vpp"),
        microbatches: num("microbatches"),
        durations_ms: this.durations(),
      };
    } else {
      req.serving = { ...this.servingFields(), durations_ms: this.durations() };
    }
    return req;
  }

  /** Put a study's plan into the serving form (built-in profiles only). */
  async loadServing(problem, plan) {
    document.querySelector('input[name="mode"][value="serving"]').checked = true;
    $("training-fields").hidden = true;
    $("serving-fields").hidden = false;
    $("simulate-comm").checked = true;
    const set = (id, v) => { if (v !== undefined && v !== null) $(id).value = v; };
    set("model", problem.model);
    set("noc", problem.noc);
    if (problem.memory) set("memory", problem.memory.replaceAll("_", "-"));
    $("chip").value = typeof problem.chip === "string" ? problem.chip : "";
    $("memory").disabled = (this.catalog.gpu_chips || []).includes($("chip").value);
    set("s-tp", plan.tp); set("s-ep", plan.ep); set("s-dp", plan.dp);
    set("s-pp", plan.pp); set("s-cp", plan.cp);
    set("s-moe", plan.moe_tp_mode ?? "replace");
    set("s-moe-tp", plan.moe_tp ?? 0);
    set("s-overlap", plan.comm_overlap ?? "none");
    set("batch", plan.batch_size ?? problem.batch_size);
    set("input-seq", problem.input_seq);
    set("output-seq", problem.output_seq);
    $("dur-unit").textContent = "ms per op (from the estimate)";
    await this.refreshEstimate();
  }
}

function fill(select, names, chosen) {
  select.innerHTML = names.map((n) => `<option${n === chosen ? " selected" : ""}>${n}</option>`).join("");
}
