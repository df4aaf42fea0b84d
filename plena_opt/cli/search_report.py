"""What ``plena-opt search`` tells the user around a search: progress, files written, next steps.

Progress goes to stderr: a tqdm bar on a terminal, otherwise one plain line every
``LINE_INTERVAL_S`` seconds (logs and pipes get readable lines, not carriage returns). The
hypervolume shown is on a normalisation fixed at the first report (``runner.Progress``), so it
never goes down.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from typing import Any, TextIO

from plena_opt.api.search_io import Progress, SearchResult
from plena_opt.cli.common import add_workload_args

LINE_INTERVAL_S = 2.0
PLAN_FLAGS = ("tp", "ep", "dp", "pp", "cp")


def _text(p: Progress) -> str:
    total = f"/{p.total}" if p.total else ""
    hv = f", hypervolume {p.hypervolume:.4f}" if p.hypervolume is not None else ""
    return f"[{p.stage}] {p.done}{total} plans, {p.trials_per_s:.0f}/s, front {p.front_size}{hv}"


class ProgressReporter:
    """Progress on ``stream``: tqdm on a terminal, periodic lines elsewhere; off when quiet."""

    def __init__(self, quiet: bool, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = not quiet
        self.tty = self.enabled and self.stream.isatty()
        self.bar: Any = None
        self._last_line = 0.0

    def __call__(self, p: Progress) -> None:
        if not self.enabled or p.stage == "done":
            return
        if self.tty:
            self._tqdm(p)
            return
        now = time.monotonic()
        if now - self._last_line >= LINE_INTERVAL_S:
            self._last_line = now
            print(_text(p), file=self.stream, flush=True)

    def _tqdm(self, p: Progress) -> None:
        from tqdm import tqdm

        if self.bar is None or self.bar.desc != p.stage:
            self.close()
            self.bar = tqdm(total=p.total, desc=p.stage, unit="plan", file=self.stream, leave=False)
        self.bar.n = p.done
        hv = f"{p.hypervolume:.4f}" if p.hypervolume is not None else "-"
        self.bar.set_postfix(front=p.front_size, hv=hv, refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def workload_flags(args: argparse.Namespace) -> list[str]:
    """The model/cluster/workload flags of ``args`` that differ from their defaults."""
    probe = argparse.ArgumentParser(add_help=False)
    add_workload_args(probe)
    out: list[str] = []
    for action in probe._actions:  # argparse keeps its actions in this documented attribute
        if not action.option_strings:
            continue
        value = getattr(args, action.dest, action.default)
        always = action.dest == "noc"  # named always: commands may differ in their default NoC
        if value is None or (value == action.default and not always):
            continue
        flag = action.option_strings[0]
        out += [flag] if value is True else [flag, str(value)]
    return out


def plan_flags(plan: dict[str, Any]) -> list[str]:
    """``--tp … --comm-overlap …`` for a front entry's plan, with its batch size."""
    out = [x for k in PLAN_FLAGS for x in (f"--{k}", str(plan[k]))]
    out += ["--moe-tp-mode", str(plan["moe_tp_mode"]), "--comm-overlap", str(plan["comm_overlap"])]
    out += ["--moe-tp", str(plan["moe_tp"])] if plan.get("moe_tp") else []
    out += ["--batch-size", str(plan["batch_size"])]
    return out + (["--precision", str(plan["precision"])] if plan.get("precision") else [])


def next_steps(
    args: argparse.Namespace, result: SearchResult, written: list[str], rec: Any = None
) -> list[str]:
    """Lines after the result: the files written, the dashboard, then the one recommendation
    (``plena_opt.api.recommend``) with the commands to go on with, or why there is none."""
    lines = []
    if written:
        lines.append("wrote: " + "; ".join(written))
    if result.storage != ":memory:":
        lines.append(
            f"dashboard:  plena-opt dashboard --storage {shlex.quote(result.storage)}"
            f"  (study {result.study_name})"
        )
    if rec is None:
        lines.append(f"no recommendation: {empty_reason(result)}")
        return lines
    lines.append(rec.to_text())
    if rec.kind == "aggregated":
        base = workload_flags(args)
        base = [x for i, x in enumerate(base) if not (x == "--batch-size" or
                (i and base[i - 1] == "--batch-size"))]  # fmt: skip
        flags = shlex.join(base + plan_flags(rec.plan))
        # a static search's --engine priced its kernels: the commands price them too
        static = getattr(args, "engine", None) if result.under_load is None else None
        engine = f" --engine {shlex.quote(static)}" if static else ""
        lines.append(f"  estimate it:  plena-opt estimate {flags}{_load_flags(result)}{engine}")
        if result.under_load:
            engine = f" --engine {result.under_load['engine']}"
        lines.append(f"  simulate it:  plena-opt simulate {flags}{engine}")
    return lines


def _load_flags(result: SearchResult) -> str:
    """`` --concurrency C --engine E …`` of a search under load (issue 23), else empty."""
    u = result.under_load
    if u is None:
        return ""
    flags = (["--concurrency", str(u["concurrency"])] if u["concurrency"] is not None
             else ["--request-rate", f"{u['request_rate_per_s']:g}"])  # fmt: skip
    flags += ["--engine", u["engine"]]
    if u["range_ratio"]:
        flags += ["--range-ratio", f"{u['range_ratio']:g}"]
    if u.get("memory_fraction") is not None:  # the KV pool the plans were judged with
        flags += ["--memory-fraction", f"{u['memory_fraction']:g}"]
    return " " + shlex.join(flags)


def empty_reason(result: SearchResult) -> str:
    """Why a search ends without a recommendation: the empty front's reason, else the
    serving comparison's."""
    from plena_opt.api.search_io import no_front_message

    if not result.front:
        return no_front_message(result)
    cmp = result.serving.get("comparison") or {}
    reasons = [cmp[m].get("empty_reason") for m in ("aggregated", "disaggregated") if m in cmp]
    return "; ".join(r for r in reasons if r) or "the serving comparison has no deployment"


def plot_title(request: Any) -> str:
    """Model, cluster and workload of a search, for the plot's title."""
    p = request.problem
    batches = ",".join(str(b) for b in request.batch_list())
    return (
        f"{p.model_label()} on {p.noc}\ninput {p.input_seq} / output {p.output_seq} "
        f"tokens, batch {batches}; objectives {', '.join(request.objectives)}"
    )
