"""A load curve: one row per interval of a day or a week (``plena-opt capacity --load FILE``).

CSV with a header: ``start_hour,requests_per_second,input_tokens,output_tokens`` (the request
rate and the mean prompt / output lengths in tokens over the interval), optionally
``input_tokens_p90`` and ``output_tokens_p90`` (the 90th-percentile lengths, at least the means).
Lines starting with ``#`` are comments. Rows start at hour 0 and their hours rise strictly; an
interval lasts until the next row's start, the last one until the end of the period: 24 h when
the last row starts before hour 24, else 168 h (a week; the last row must start before 168).
``input_tokens_p90`` sets the prompt of the TTFT tail (``sla_rate``); ``output_tokens_p90`` is
checked and kept but enters neither TTFT nor TPOT (a longer output moves neither the first token
nor the mean gap between tokens at the step model's mean KV length).
Every error names the row (1-based, comments and header not counted) and the column.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

from plena_opt.bounds import MAX_LOAD_FILE_BYTES, MAX_LOAD_LENGTH_PROFILES, MAX_LOAD_ROWS
from plena_opt.errors import PlenaInputError
from plena_opt.serving.open_loop import MAX_RATE
from plena_opt.serving.workload import MAX_TOKENS

REQUIRED = ("start_hour", "requests_per_second", "input_tokens", "output_tokens")
OPTIONAL = ("input_tokens_p90", "output_tokens_p90")
DAY_HOURS, WEEK_HOURS = 24.0, 168.0


@dataclass(frozen=True)
class LoadInterval:
    """One interval: starts at ``start_hour``, lasts ``hours``; ``rate_per_s`` requests/s with
    mean lengths ``input_tokens``/``output_tokens`` (p90 lengths None when not given)."""

    start_hour: float
    hours: float
    rate_per_s: float
    input_tokens: float
    output_tokens: float
    input_tokens_p90: float | None = None
    output_tokens_p90: float | None = None


@dataclass(frozen=True)
class LoadCurve:
    """The intervals in order and the period they cover (24 h or 168 h)."""

    intervals: tuple[LoadInterval, ...]
    period_hours: float
    source: str = ""

    @property
    def days(self) -> float:
        """Days the curve covers (1 or 7): per-day figures divide by it."""
        return self.period_hours / DAY_HOURS


def _err(row: int, column: str, rule: str) -> PlenaInputError:
    return PlenaInputError(f"load.row {row}.{column}", rule)


def _number(text: str | None, row: int, column: str, lo: float, hi: float) -> float:
    try:
        v = float((text or "").strip())
    except ValueError:
        raise _err(row, column, f"must be a number; got {(text or '')[:24]!r}") from None
    if not math.isfinite(v) or not lo <= v <= hi:
        raise _err(row, column, f"must be in [{lo:g}, {hi:g}]; got {v:g}")
    return v


def parse_load_curve(text: str, source: str = "load") -> LoadCurve:
    """The validated curve from CSV text (module docstring)."""
    text = text.removeprefix("\ufeff")  # a byte-order mark some spreadsheets write
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        raise PlenaInputError("load", f"{source}: no header row")
    reader = csv.DictReader(io.StringIO("\n".join(lines)))
    header = [h.strip() for h in reader.fieldnames or []]
    reader.fieldnames = header
    for col in REQUIRED:
        if col not in header:
            raise PlenaInputError(f"load.{col}", f"{source}: missing column {col!r}")
    extra = [h for h in header if h not in REQUIRED + OPTIONAL]
    if extra:
        raise PlenaInputError(
            f"load.{extra[0][:32]}",
            f"{source}: unknown column; the columns are {', '.join(REQUIRED + OPTIONAL)}",
        )
    rows, profiles = [], set()
    for i, rec in enumerate(reader, start=1):
        if i > MAX_LOAD_ROWS:
            raise _err(i, "start_hour", f"too many rows: at most {MAX_LOAD_ROWS}")
        if None in rec or any(rec.get(c) is None for c in header):
            raise _err(i, "start_hour", f"has {len(header)} columns in the header but not here")
        rows.append(_row(rec, i))
        profiles.add(length_profile(rows[-1]["input_tokens"], rows[-1]["output_tokens"],
                                    rows[-1]["input_tokens_p90"]))  # fmt: skip
        if len(profiles) > MAX_LOAD_LENGTH_PROFILES:
            raise _err(i, "input_tokens", f"more than {MAX_LOAD_LENGTH_PROFILES} distinct "
                       "length profiles (input, output, input p90) in one file")  # fmt: skip
    if not rows:
        raise PlenaInputError("load", f"{source}: no intervals")
    return _curve(rows, source)


def length_profile(isl: float, osl: float, isl_p90: float | None) -> tuple[int, int, int | None]:
    """The whole-token lengths an interval is priced at (means rounded, at least 1)."""
    tail = None if isl_p90 is None else max(1, round(isl_p90))
    return max(1, round(isl)), max(1, round(osl)), tail


def _row(rec: dict, i: int) -> dict[str, float | None]:
    out: dict[str, float | None] = {
        "start_hour": _number(rec["start_hour"], i, "start_hour", 0, WEEK_HOURS),
        "rate_per_s": _number(rec["requests_per_second"], i, "requests_per_second", 0, MAX_RATE),
        "input_tokens": _number(rec["input_tokens"], i, "input_tokens", 1, MAX_TOKENS),
        "output_tokens": _number(rec["output_tokens"], i, "output_tokens", 1, MAX_TOKENS),
    }
    for col, mean in (("input_tokens_p90", "input_tokens"), ("output_tokens_p90", "output_tokens")):
        text = (rec.get(col) or "").strip()
        out[col] = _number(text, i, col, out[mean] or 1, MAX_TOKENS) if text else None  # type: ignore[arg-type]
    return out


def _curve(rows: list[dict], source: str) -> LoadCurve:
    starts = [r["start_hour"] for r in rows]
    if starts[0] != 0:
        raise _err(1, "start_hour", f"the first interval must start at hour 0; got {starts[0]:g}")
    for i in range(1, len(starts)):
        if starts[i] <= starts[i - 1]:
            raise _err(
                i + 1,
                "start_hour",
                f"hours must rise strictly; {starts[i]:g} follows {starts[i - 1]:g}",
            )
    period = DAY_HOURS if starts[-1] < DAY_HOURS else WEEK_HOURS
    if starts[-1] >= period:
        raise _err(len(rows), "start_hour", f"must be below {period:g} (a day or a week)")
    ends = starts[1:] + [period]
    intervals = tuple(
        LoadInterval(
            r["start_hour"],
            end - r["start_hour"],
            r["rate_per_s"],
            r["input_tokens"],
            r["output_tokens"],
            r["input_tokens_p90"],
            r["output_tokens_p90"],
        )
        for r, end in zip(rows, ends, strict=True)
    )
    return LoadCurve(intervals, period, source)


def load_curve(path: str | Path) -> LoadCurve:
    """Read and validate a load-curve file (bounded at ``MAX_LOAD_FILE_BYTES``)."""
    from plena_opt.jsonio import read_user_text

    text = read_user_text(path, "load", "load", MAX_LOAD_FILE_BYTES)
    return parse_load_curve(text, Path(path).name)


def example_curve_path() -> Path:
    """The shipped diurnal example (``data/diurnal_example.csv``)."""
    return Path(__file__).with_name("data") / "diurnal_example.csv"
