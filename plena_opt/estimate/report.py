"""Human-readable reports of estimates (analytic-model §3.5 and §5 text layout)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from plena_opt.jsonio import dumps as strict_json
from plena_opt.memory.config import DEFAULT_MEMORY_PJ_PER_BIT

if TYPE_CHECKING:
    from plena_opt.estimate.cost import CostFigures
    from plena_opt.estimate.evaluator import PlanMetrics

GB = 1e9  # bandwidths (GB/s) and DRAM traffic
GIB = 2**30  # capacities and footprints, as the warnings, the search table and the flags


def _ms(x: float) -> str:
    return f"{x * 1e3:.4f}"


def _footprint_line(weights: float, kv: float, capacity: float | None, fits: bool | None) -> str:
    state = "not modeled" if fits is None else ("fits" if fits else "DOES NOT FIT")
    cap = "" if capacity is None else f" of {capacity / GIB:.2f} GiB"
    return f"{weights / GIB:.3f} GiB weights + {kv / GIB:.3f} GiB KV per device{cap} ({state})"


def _memory_lines(mem: dict) -> list[str]:
    cap = mem.get("capacity_bytes")
    cap_text = "unbounded" if cap is None else f"{cap / GIB:.3f} GiB"
    bw = mem["usable_bandwidth_bytes_per_s"] / GB
    return [
        f"{'Memory':<16}{mem['name']} ({mem['kind']}), usable {bw:.3f} GB/s, capacity {cap_text}"
    ]


def render_distributed(est: dict, metrics: PlanMetrics | None = None) -> str:
    """Text report of a distributed estimate (``DistributedEstimate.to_dict()``)."""
    m, p = est["model"], est["plan"]
    lines = [
        f"{'Model':<16}{m['name']} ({m['family']}), batch {est['batch_size']}, input "
        f"{est['input_seq_len']}, output {est['output_seq_len']}",
        f"{'Plan':<16}tp={p['tp']} ep={p['ep']} dp={p['dp']} pp={p['pp']} cp={p['cp']} on "
        f"{p['world_size']} devices, NoC {est['noc']['name']}",
        f"{'Micro-batch':<16}{est['micro_batch']} sequences, "
        f"{est['sequences_per_device']} per device",
    ]
    moe = est.get("moe")
    if moe:
        lines.append(
            f"{'MoE':<16}tp={moe['tp']} ep={moe['ep']} dp={moe['dp']}, "
            f"{moe['experts_per_rank']} experts per rank, routing {est['routing']}"
        )
        for phase in ("prefill", "decode"):
            ld = moe[phase]
            lines.append(
                f"{'':<16}{phase}: {ld['tokens_per_rank']} tokens, "
                f"{ld['token_expert_pairs_on_busiest_rank']} token-expert pairs on the busiest "
                f"rank, imbalance {ld['imbalance']:.4f} ({ld['source']})"
            )
    lines += _memory_lines(est["memory"])
    chip = est.get("chip")
    if chip:  # a GPU: kernel-by-kernel pricing, LM head always priced
        lines += _gpu_chip_lines(chip)
        lines.append(f"{'Overlap':<16}per-kernel roofline, comm overlap {est['comm_overlap']}")
    else:
        lines.append(f"{'Compute clock':<16}{est['compute_frequency_hz'] / 1e9:.4f} GHz")
        lm = " (LM head priced)" if est["include_lm_head"] else ""
        lines.append(
            f"{'Overlap':<16}{est['overlap_policy']}, comm overlap {est['comm_overlap']}{lm}"
        )
    lines.append("")
    header = (
        f"{'pass':<14}{'latency ms':>12}{'period ms':>12}{'bneck':>7}{'compute ms':>12}"
        f"{'memory ms':>12}{'comm ms':>12}{'p2p ms':>10}"
    )
    lines.append(header)
    for label, key in (("prefill", "prefill"), ("first decode", "first_token_decode")):
        ps = est[key]
        st = ps["stages"][ps["bottleneck_stage"]]
        comm = sum(st["comm_seconds"].values())
        lines.append(
            f"{label:<14}{_ms(ps['latency_seconds']):>12}{_ms(ps['period_seconds']):>12}"
            f"{ps['bottleneck_stage']:>7}{_ms(st['compute_seconds']):>12}"
            f"{_ms(st['memory_seconds']):>12}{_ms(comm):>12}{_ms(ps['transfer_seconds']):>10}"
        )
    lines.append("")
    lines.append(f"{'TTFT':<16}{_ms(est['ttft_seconds'])} ms")
    lines.append(
        f"{'TPS':<16}{est['tps']:.3f} tokens/s ({est['tps_per_sequence']:.3f} per sequence)"
    )
    lines.append(
        f"{'Footprint':<16}"
        + _footprint_line(
            est["weight_bytes_per_device"],
            est["kv_cache_bytes_per_device"],
            est["memory_capacity_bytes"],
            est["fits_in_memory"],
        )
    )
    noc = est["noc_energy_pj_per_decode_token"]
    noc_text = "not modeled (no energy coefficients)" if noc is None else f"{noc * 1e-6:.3f} µJ"
    lines.append(f"{'NoC energy':<16}{noc_text} per decode token")
    if metrics is not None:
        lines += _metrics_lines(est, metrics)
    for w in est["warnings"]:
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def _metrics_lines(est: dict, metrics: PlanMetrics) -> list[str]:
    """Energy per generated token and the decode-step breakdown (from ``PlanMetrics``)."""
    lines = []
    e = metrics.energy_per_token_joules
    dram = "DRAM"
    if est["memory"].get("energy") is None:
        dram = f"DRAM at the default {DEFAULT_MEMORY_PJ_PER_BIT} pJ/bit (HBM2, O'Connor 2017)"
    noc_known = est["noc_energy_pj_per_decode_token"] is not None
    note = dram + (" + NoC" if noc_known else "; NoC not modelled")
    if est.get("chip_power"):
        note += " + compute at the chip's busy/idle watts"
    else:
        note += "; compute not modelled (no power figure in the PLENA profile)"
    if est.get("chip"):  # a GPU: energy from the board power model
        note = "board power: busy/idle watts" + (" + NoC" if noc_known else "")
    lines.append(
        f"{'Energy':<16}"
        + ("not modelled" if e is None else f"{e:.6g} J per generated token ({note})")
    )
    total = metrics.decode_step_seconds
    parts = ", ".join(
        f"{k} {v / total * 100:.1f}%" for k, v in metrics.attribution.items() if v > 0
    )
    lines.append(f"{'Decode step':<16}{_ms(total)} ms: {parts}")
    return lines


def render_single_chip(est: dict) -> str:
    """Text report of a single-chip estimate (``DecoderLatencyEstimate.to_dict()``)."""
    mem = est["memory"]
    lines = [
        f"{'Model':<16}{est['model']}, batch {est['batch_size']}, input "
        f"{est['input_seq_len']}, output {est['output_seq_len']}",
        *_memory_lines(mem),
        f"{'Compute clock':<16}{est['compute_frequency_hz'] / 1e9:.4f} GHz",
        f"{'Overlap':<16}{est['overlap_policy']}"
        + (" (LM head priced)" if est["include_lm_head"] else ""),
        "",
        f"{'phase':<16}{'time ms':>12}{'compute ms':>12}{'memory ms':>12}{'mem-bound':>10}"
        f"{'DRAM GB':>10}",
    ]
    rows = (
        ("prefill", est["prefill"]),
        ("first decode", est["first_token_decode"]),
        (f"decode x{est['output_seq_len']}", est["decode"]),
    )
    for label, ph in rows:
        share = ph["memory_bound_seconds"] / ph["seconds"] * 100 if ph["seconds"] else 0.0
        dram = (ph["read_bytes"] + ph["write_bytes"]) / GB
        lines.append(
            f"{label:<16}{_ms(ph['seconds']):>12}{_ms(ph['compute_seconds']):>12}"
            f"{_ms(ph['memory_seconds']):>12}{share:>9.1f}%{dram:>10.3f}"
        )
    lines += [
        "",
        f"{'TTFT':<16}{_ms(est['ttft_seconds'])} ms",
        f"{'TPS':<16}{est['tps']:.3f} tokens/s",
        f"{'Footprint':<16}"
        + _footprint_line(
            est["weight_footprint_bytes"],
            est["kv_cache_footprint_bytes"],
            est["memory_capacity_bytes"],
            est["fits_in_memory"],
        ),
    ]
    e = est["decode"]["dram_energy_pj"]
    if e is not None:
        lines.append(f"{'DRAM energy':<16}{e * 1e-12:.6g} J over the decode")
    lines += [f"warning: {w}" for w in est["warnings"]]
    return "\n".join(lines)


def does_not_fit(est: dict) -> str | None:
    """Why the estimated plan does not fit its devices' memory (None: it fits or memory is not
    modelled), from a distributed or single-chip estimate document (bytes per device)."""
    if est.get("fits_in_memory") is not False:
        return None
    weights = est.get("weight_bytes_per_device", est.get("weight_footprint_bytes", 0.0))
    kv = est.get("kv_cache_bytes_per_device", est.get("kv_cache_footprint_bytes", 0.0))
    cap = est.get("memory_capacity_bytes")
    of = "" if cap is None else f" of {cap / GIB:,.1f} GiB"
    return (
        f"the plan does not fit: it needs {(weights + kv) / GIB:,.1f} GiB per device "
        f"({weights / GIB:,.1f} GiB weights + {kv / GIB:,.1f} GiB KV){of}; the figures below "
        "assume memory it does not have (spread it over more devices, a smaller --precision, a "
        "smaller --batch-size or a shorter context)"
    )


def _with_fit(doc: dict) -> dict:
    """``doc`` with the top-level ``fits`` (bool or null) and ``does_not_fit`` (reason or null)
    first, so a reader cannot miss them."""
    return {"fits": doc.get("fits_in_memory"), "does_not_fit": does_not_fit(doc), **doc}


def _fit_first(text: str, est: dict) -> str:
    reason = does_not_fit(est)
    return text if reason is None else f"DOES NOT FIT: {reason}\n\n{text}"


def estimate_output(
    est: dict, metrics: PlanMetrics, *, as_json: bool, cost: CostFigures | None = None
) -> str:
    """What ``plena-opt estimate`` prints for a distributed estimate (local or remote mode):
    the reference JSON plus energy per token, the decode-step attribution and the cost fields
    (``usd_per_million_output_tokens``, …; with ``cost``), or the text; a plan that does not fit
    says so first (text) and in ``fits``/``does_not_fit`` (JSON)."""
    if not as_json:
        text = render_distributed(est, metrics)
        text = text if cost is None else text + "\n" + cost_line(cost)
        return _fit_first(text, est)
    doc = _with_fit(est)
    doc["energy_per_token_joules"] = metrics.energy_per_token_joules
    doc["decode_attribution_seconds"] = metrics.attribution
    if cost is not None:
        doc.update(cost.to_dict())
    return strict_json(doc, indent=2)


def cost_line(cost: CostFigures) -> str:
    """One text line: $/Mtok output and input, tokens/s per kW, W per device (or why not)."""
    power = cost.power_watts_per_device
    watts = "power not modelled" if power is None else f"{power:.4g} W/device"
    per_kw = "" if cost.tps_per_kilowatt is None else f", {cost.tps_per_kilowatt:.4g} tok/s/kW"
    if cost.usd_per_million_output_tokens is None:
        return f"{'Cost':<16}not priced ({cost.cost_note}); {watts}{per_kw}"
    inp = cost.usd_per_million_input_tokens
    inp_text = "" if inp is None else f", ${inp:.4g} per M input tokens"
    note = "" if cost.cost_note is None else f" ({cost.cost_note})"
    return (
        f"{'Cost':<16}${cost.usd_per_million_output_tokens:.4g} per M output tokens{inp_text}; "
        f"{watts}{per_kw}{note}"
    )


def single_chip_output(est: dict, *, as_json: bool) -> str:
    """What ``plena-opt estimate`` prints for a single-chip estimate (a plan that does not fit
    says so first, as ``estimate_output``)."""
    if as_json:
        return strict_json(_with_fit(est), indent=2)
    return _fit_first(render_single_chip(est), est)


def _gpu_chip_lines(chip: dict) -> list[str]:
    """The ``Chip`` line of a GPU estimate and its ``Checkpoint`` line: the checkpoint's format
    and whether the plan runs it or quantises it (issue 24)."""
    lines = [
        f"{'Chip':<16}{chip['name']} (gpu), {chip['precision']} at the "
        f"{chip['compute_format']} rate"
        + (" (weight-only)" if chip.get("weight_only") else "")
        + f", KV {chip['kv_bytes_per_element']:g} B/element"
    ]
    if chip.get("checkpoint_precision"):
        own = not chip["quantised_from_checkpoint"]
        lines.append(
            f"{'Checkpoint':<16}{chip['checkpoint_precision']} ({chip['checkpoint_source']})"
            + ("; the plan runs the checkpoint's format" if own else
               f"; {chip['precision']} is NOT the checkpoint's format (quantised)")
        )  # fmt: skip
    return lines
