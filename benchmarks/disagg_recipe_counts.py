"""Worker counts of the shipped disaggregated InferenceX rows, from InferenceX's own recipes.

``plena-opt validate --measurements shipped`` refuses the disaggregated InferenceX rows of
measured_serving_h100_b200.csv ("disagg row without worker counts"): the dump kept each pool's
per-worker sizes and the concurrency, not how many prefill / decode workers ran. InferenceX's
multi-node sweep config (``.github/configs/nvidia-master.yaml`` of SemiAnalysisAI/InferenceX,
only that recipe file is read, never its results) lists, per config key (model, GPU,
precision, framework, image) and (ISL, OSL), search-space entries: a concurrency list, the
prefill and decode workers (``num-worker``, ``tp``, ``ep``, ``dp-attn``) and ``spec-decoding``.

For each refused row this script takes the config file as it stood on the row's
``measured_on`` day (the last commit to it on or before that day), and lists the entries that
match the row: framework (dynamo-trt / dynamo-sglang) and engine image, GPU (runner), model (a
``dsr1-`` key; ``model-prefix`` was mis-set in some versions), precision, ISL/OSL, per-pool
``tp`` / ``ep`` and the concurrency. A row is *matched* only where exactly one entry matches
and it is not MTP (the row does not record speculative decoding; a ``-mtp`` key or
``spec-decoding: mtp`` marks an MTP entry). It is then priced by the product's own validate
path (``serving_score._price_row``: ``resolve`` -> ``_disaggregated`` -> ``price_disaggregated``)
with the row's pool fields filled from the entry: as the sizes read (``asrow``: attention TP =
the worker's GPUs) and with the recipe's ``dp-attn`` (``dpattn``: attention DP = the worker's
GPUs, attention TP 1); MoE ``tp / ep`` x ``ep`` either way.

DECODE_EP_NOTE: on all 393 rows the recorded decode EP size equals the prefill's, where the
recipes often differ (e.g. every DSR1 FP4 B200 TensorRT-LLM decode pool is ``tp 8 ep 8`` in the
config, ``moe 2 x 4`` in the rows, the prefill's ``ep 4``): the dump appears to copy the prefill
EP into the decode fields. The ``relaxed`` match does not compare the decode EP and prices the
recipe's.

Diagnostic only (issue r17disagg): validate still refuses these rows.

Usage: python benchmarks/disagg_recipe_counts.py [--repo GIT_DIR] [--csv PATH] [--rows]
``--repo``: a git directory of SemiAnalysisAI/InferenceX (the ``fetch`` tool's mirror).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from plena_opt.validate.serving_rows import ServingRow, read_rows
from plena_opt.validate.serving_score import _price_row

CONFIG = ".github/configs/nvidia-master.yaml"
DEFAULT_REPO = Path("/work/.mirror/SemiAnalysisAI+InferenceX/repo")
DEFAULT_CSV = Path("/work/shared/data/validation/serving/measured_serving_h100_b200.csv")
FRAMEWORK = {"trtllm": "dynamo-trt", "sglang": "dynamo-sglang"}  # row backend -> framework
# row system -> runner (``b200-multinode`` / ``b200-multinode-slurm`` in some versions)
RUNNER = {"b200_sxm": "b200-multinode", "h100_sxm": "h100-multinode"}


@dataclass(frozen=True)
class Pool:
    """One pool of a recipe entry: workers, GPUs per worker (tp), expert parallel, attention DP."""

    workers: int
    tp: int
    ep: int
    dp_attn: bool


@dataclass(frozen=True)
class Entry:
    """One search-space entry of the config file that may have run a row."""

    key: str
    commit: str
    mtp: bool
    prefill: Pool
    decode: Pool
    config_file: str = ""


@dataclass
class Match:
    """A row and the entries that match it; ``why``: the reason none matched."""

    row: ServingRow
    commit: str
    entries: list[Entry] = field(default_factory=list)
    why: str = ""

    @property
    def status(self) -> str:
        if not self.entries:
            return "unmatched"
        if all(e.mtp for e in self.entries):
            return "mtp"
        if len(self.entries) == 1:
            return "matched"
        return "ambiguous"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(repo), *args], check=True,
                          capture_output=True, text=True).stdout  # fmt: skip


class Recipes:
    """The config file's versions (git history), parsed on demand."""

    def __init__(self, repo: Path) -> None:
        if not (repo / "HEAD").exists() and not (repo / ".git").exists():
            raise SystemExit(f"--repo {repo}: not a git directory of SemiAnalysisAI/InferenceX")
        self.repo = repo if (repo / "HEAD").exists() else repo / ".git"
        log = _git(self.repo, "log", "--format=%H %cs", "--", CONFIG).split("\n")
        self.history = sorted((d, h) for h, d in (ln.split() for ln in log if ln.strip()))
        self._parsed: dict[str, dict] = {}

    def commit_on(self, day: str) -> str | None:
        """The last commit to the config on or before ISO ``day`` (commit date)."""
        before = [h for d, h in self.history if d <= day]
        return before[-1] if before else None

    def config(self, commit: str) -> dict:
        if commit not in self._parsed:
            self._parsed[commit] = yaml.safe_load(_git(self.repo, "show", f"{commit}:{CONFIG}"))
        return self._parsed[commit]


def _pool(p: dict) -> Pool:
    return Pool(int(p["num-worker"]), int(p["tp"]), int(p.get("ep", 1)), bool(p.get("dp-attn")))


def match_row(row: ServingRow, recipes: Recipes, relaxed: bool = False) -> Match:
    """The config entries that may have run ``row`` (module docstring), with a reason if none;
    ``relaxed``: the row's decode EP size is not compared (``DECODE_EP_NOTE``)."""
    day = row.get("measured_on")
    commit = recipes.commit_on(day)
    if commit is None:
        return Match(row, "", why=f"no version of {CONFIG} on or before {day}")
    m = Match(row, commit[:9])
    want = [(int(row.get(f"{r}_tp_size")), int(row.get(f"{r}_moe_ep_size") or 1))
            for r in ("prefill", "decode")]  # fmt: skip
    conc, isl, osl = int(row.get("concurrency")), int(row.get("isl")), int(row.get("osl"))
    stages = Counter()
    for key, cfg in recipes.config(commit).items():
        if not isinstance(cfg, dict) or not cfg.get("disagg"):
            continue
        if (cfg.get("framework") != FRAMEWORK.get(row.get("backend"))
                or not str(cfg.get("runner")).startswith(RUNNER.get(row.get("system"), "?"))
                or not key.startswith("dsr1-")
                or cfg.get("precision") != row.get("precision")):  # fmt: skip
            continue
        stages["config"] += 1
        if cfg.get("image") != row.get("engine_image"):
            continue
        stages["image"] += 1
        for slc in cfg.get("seq-len-configs", []):
            if (int(slc["isl"]), int(slc["osl"])) != (isl, osl):
                continue
            stages["lengths"] += 1
            for ss in slc.get("search-space", []):
                if conc not in [int(c) for c in ss.get("conc-list", [])]:
                    continue
                stages["concurrency"] += 1
                pre, dec = _pool(ss["prefill"]), _pool(ss["decode"])
                got = [(pre.tp, pre.ep), (dec.tp, want[1][1] if relaxed else dec.ep)]
                if got != want:
                    continue
                extra = ss["prefill"].get("additional-settings") or []
                cf = next((s.split("=", 1)[1] for s in extra if s.startswith("CONFIG_FILE=")), "")
                mtp = ss.get("spec-decoding", "none") == "mtp" or key.endswith("-mtp")
                m.entries.append(Entry(key, commit[:9], mtp,
                                       pre, dec, cf))  # fmt: skip
    if not m.entries:
        for stage, why in (("config", "no dsr1 disagg config for this framework/GPU/precision"),
                           ("image", f"no config with image {row.get('engine_image')}"),
                           ("lengths", f"no {isl}x{osl} entries under the image's config"),
                           ("concurrency", f"concurrency {conc} in no entry"),
                           ("", f"sizes p tp{want[0][0]}/ep{want[0][1]} d tp{want[1][0]}/ep"
                                f"{want[1][1]} in no entry with c{conc}")):  # fmt: skip
            if not stage or not stages[stage]:
                m.why = why
                break
    return m


def priced_row(row: ServingRow, e: Entry, dp_attn: bool) -> ServingRow:
    """``row`` with the entry's pools: worker counts, the worker's GPUs (``tp``) over attention
    TP (or, with ``dp_attn`` where the recipe sets ``dp-attn``, attention DP) and MoE ``tp / ep``
    x ``ep`` (the row's own split where the strict match held)."""
    fields = dict(row.fields)
    for role, pool in (("prefill", e.prefill), ("decode", e.decode)):
        dp = pool.tp if dp_attn and pool.dp_attn else 1
        fields.update({f"{role}_num_workers": str(pool.workers),
                       f"{role}_tp_size": str(pool.tp // dp),
                       f"{role}_attention_dp_size": str(dp),
                       f"{role}_moe_tp_size": str(pool.tp // pool.ep),
                       f"{role}_moe_ep_size": str(pool.ep)})  # fmt: skip
    return ServingRow(row.id, fields)


def prefill_load(row: ServingRow, r: object) -> tuple[float, float, float, float] | None:
    """(measured request rate, the model's prefill-pool capacity one prompt at a time, its
    capacity with prompts packed into full step-budget chunks, its capacity at full batches as
    priced, ``P·B / S(B)`` of ``serving.prefill_batch``), requests/s, of a priced row.
    Measured rate: Little's law over the closed loop, ``C / (TTFT + (osl_mean - 1) TPOT)``
    with the InferenceX mean output ``0.9 osl`` (random range ratio 0.8)."""
    from plena_opt.serving.disaggregated import prefill_service_seconds
    from plena_opt.serving.pools import pool_steps
    from plena_opt.validate.serving_pools import moe_pool_steps
    from plena_opt.validate.serving_rows import resolve
    from plena_opt.validate.serving_score import _parts

    if not (r.measured_ttft_ms and r.measured_tpot_ms):  # type: ignore[attr-defined]
        return None
    d = resolve(row)
    parts = _parts(d, 0.0)
    if d.pool_plans is not None:
        prefill = moe_pool_steps(d, parts)[0]
    else:
        from plena_opt.serving.disaggregated import Pools

        prefill = pool_steps(*parts[:5], Pools(*d.pools), parts[5])[0]
    isl, osl = 0.9 * d.input_len, 0.9 * d.output_len
    e2e = 1e-3 * (r.measured_ttft_ms + (osl - 1) * r.measured_tpot_ms)  # type: ignore[attr-defined]
    one = d.pools[0] / prefill_service_seconds(prefill, int(isl))
    budget = prefill.engine.budget_tokens
    packed = d.pools[0] * budget / (isl * prefill.step_seconds(budget, 0))
    from plena_opt.serving.prefill_batch import PrefillBatches

    batches = PrefillBatches(prefill, int(isl))
    batched = d.pools[0] * batches.size / batches.seconds(batches.size)
    return d.concurrency / e2e, one, packed, batched


def _part_cells(part: list) -> str:
    """``TTFT m % (b %), TPOT m % (b %)``: MAPE and bias of the rows ``part`` (priced results)."""
    cells = []
    for metric in ("ttft_ms", "tpot_ms"):
        mape, bias = _stats([(getattr(r, metric), getattr(r, "measured_" + metric)) for r in part])
        cells.append(f"{metric[:4].upper()} {mape:.1f} % ({bias:+.1f} %)")
    return ", ".join(cells)


def _stats(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    """(MAPE %, mean signed error %) of (predicted, measured) pairs."""
    errs = [(p - m) / m for p, m in pairs]
    return 100 * sum(abs(x) for x in errs) / len(errs), 100 * sum(errs) / len(errs)


def _table(results: list[tuple[ServingRow, object]], title: str) -> None:
    groups: dict[tuple, list] = defaultdict(list)
    for row, r in results:
        key = (row.get("system"), row.get("backend"), row.get("precision"),
               f"{row.get('isl')}x{row.get('osl')}")  # fmt: skip
        groups[key].append(r)
        groups[("all", "", "", "")].append(r)
    print(f"\n{title}")
    print(f"{'system':9} {'engine':7} {'prec':4} {'lengths':10} {'n':>4} {'refused':>7} "
          f"{'TTFT MAPE':>9} {'bias':>7} {'TPOT MAPE':>9} {'bias':>7}")  # fmt: skip
    for key in sorted(groups, key=lambda k: (k[0] == "all", k)):
        rs = groups[key]
        ok = [r for r in rs if r.status == "priced"]
        cells = []
        for metric in ("ttft_ms", "tpot_ms"):
            pairs = [(getattr(r, metric), getattr(r, "measured_" + metric)) for r in ok
                     if getattr(r, metric) and getattr(r, "measured_" + metric)]  # fmt: skip
            if pairs:
                mape, bias = _stats(pairs)
                cells += [f"{mape:9.1f}", f"{bias:+7.1f}"]
            else:
                cells += [f"{'-':>9}", f"{'-':>7}"]
        print(f"{key[0]:9} {key[1]:7} {key[2]:4} {key[3]:10} {len(rs):4} "
              f"{len(rs) - len(ok):7} {cells[0]} {cells[1]} {cells[2]} {cells[3]}")  # fmt: skip


def _entries_text(m: Match) -> str:
    return " | ".join(
        sorted(
            {
                f"{'MTP ' if e.mtp else ''}{e.prefill.workers}P(tp{e.prefill.tp}"
                f"ep{e.prefill.ep}{'dp' if e.prefill.dp_attn else ''})+"
                f"{e.decode.workers}D(tp{e.decode.tp}ep{e.decode.ep}"
                f"{'dp' if e.decode.dp_attn else ''})"
                for e in m.entries
            }
        )
    )


def report(rows: list[ServingRow], recipes: Recipes, relaxed: bool, show_rows: bool,
           steps: dict) -> None:  # fmt: skip
    """Match, list the unmatched / MTP / ambiguous rows, price the matched ones both ways."""
    matches = [match_row(r, recipes, relaxed) for r in rows]
    by_status: dict[str, list[Match]] = defaultdict(list)
    for m in matches:
        by_status[m.status].append(m)
    print(
        f"\n=== {'relaxed (decode EP not compared)' if relaxed else 'strict'} match: "
        + ", ".join(f"{k} {len(v)}" for k, v in sorted(by_status.items()))
    )
    print("unmatched (reason: rows):")
    for why, n in Counter(m.why for m in by_status["unmatched"]).most_common():
        print(f"  {n:4}  {why}")
    print("mtp (every matching entry is MTP) / ambiguous (several entries): rows, entries")
    for status in ("mtp", "ambiguous"):
        for k, n in Counter(_entries_text(m) for m in by_status[status]).most_common():
            print(f"  {status:9} {n:4}  {k}")
    for dp_attn, label in ((False, "asrow"), (True, "dpattn")):
        results = []
        for m in by_status["matched"]:
            row = priced_row(m.row, m.entries[0], dp_attn)
            results.append((row, _price_row(row, steps, {}), m))
        _table(
            [(row, r) for row, r, _ in results],
            f"matched rows priced ({label}: attention "
            f"{'DP where the recipe sets dp-attn' if dp_attn else 'TP over the worker'})",
        )
        for why, n in Counter(r.reason for _, r, _ in results if r.status != "priced").items():
            print(f"  refused {n}: {why}")
        if not dp_attn:
            continue
        loads = [(row, r, m, prefill_load(row, r)) for row, r, m in results
                 if r.status == "priced"]  # fmt: skip
        over = [x for x in loads if x[3] and x[3][0] > x[3][1]]
        distinct = {(r.measured_ttft_ms, r.measured_tpot_ms) for _, r, _, _ in loads}
        print(f"  {len(distinct)} distinct measurements (the two dumps repeat runs)")
        print(
            f"  prefill pool: measured request rate above the model's one-prompt-at-a-time "
            f"capacity on {len(over)} of {len(loads)} rows; above the packed-chunk capacity "
            f"on {sum(1 for x in loads if x[3] and x[3][0] > x[3][2])}"
        )
        parts = {
            "measured rate above the full-batch capacity (prefill-bound)":
                [r for _, r, _, load in loads if load and load[0] > load[3]],
            "measured rate within it":
                [r for _, r, _, load in loads if load and load[0] <= load[3]],
            "measured rate < half the one-at-a-time capacity":
                [r for _, r, _, load in loads if load and load[0] < 0.5 * load[1]],
            "the rest (prefill pool loaded)":
                [r for _, r, _, load in loads if load and load[0] >= 0.5 * load[1]],
        }  # fmt: skip
        for name, part in parts.items():
            print(f"  {name}: {len(part)} rows, {_part_cells(part)}")
        if show_rows:
            print(
                f"  {'row':44} {'pools':22} {'conc':>5} {'TTFT pred/meas ms':>19} "
                f"{'TPOT pred/meas':>15} {'req/s meas/1-at-a-time/packed/full-batch':>41}"
            )
            for row, r, m, load in loads:
                print(f"  {row.id[:44]:44} {_entries_text(m)[:22]:22} "
                      f"{row.get('concurrency'):>5} {r.ttft_ms:9.0f}/{r.measured_ttft_ms:<9.0f} "
                      f"{r.tpot_ms:6.1f}/{r.measured_tpot_ms:<6.1f}   "
                      f"{load[0]:7.1f}/{load[1]:7.1f}/{load[2]:7.1f}/{load[3]:7.1f}"
                      if load else "")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", type=Path, default=DEFAULT_REPO)
    ap.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    ap.add_argument("--rows", action="store_true", help="print every matched row")
    args = ap.parse_args(argv)
    recipes = Recipes(args.repo)
    refused = [r for r in read_rows(args.csv)
               if r.get("mode") == "disagg" and not r.get("prefill_num_workers")]  # fmt: skip
    print(f"{len(refused)} disagg rows without worker counts")
    steps: dict = {}
    for relaxed in (False, True):
        report(refused, recipes, relaxed, args.rows, steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
