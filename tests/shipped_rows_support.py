"""The shipped serving measurements cut to the rows a test scores (``validate.serving_score``),
shared by the tests that price one group of them with and without a modelling choice."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

from plena_opt.validate.serving_score import score_serving, shipped_serving_csv


def shipped_rows() -> tuple[list[str], list[dict[str, str]]]:
    """The shipped measurement file's header and rows, as ``csv.DictReader`` reads them."""
    with shipped_serving_csv().open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        return list(reader.fieldnames or []), rows


def write_rows(path: Path, fields: list[str], rows: list[dict[str, str]]) -> Path:
    """``rows`` written to ``path`` under the header ``fields``; ``path``."""
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    return path


def shipped_subset(path: Path, keep: Callable[[dict[str, str]], bool]) -> Path:
    """The shipped rows for which ``keep(row)`` holds, written to ``path``; ``path``."""
    fields, rows = shipped_rows()
    return write_rows(path, fields, [r for r in rows if keep(r)])


def tpot_mape_bias(path: Path, rows: int) -> tuple[float, float]:
    """(MAPE, mean signed error) of the predicted TPOT over the rows of ``path`` that
    ``score_serving`` prices, as fractions; asserts that it prices ``rows`` of them."""
    priced = [r for r in score_serving(path).rows if r.status == "priced"]
    errs = [r.tpot_ms / r.measured_tpot_ms - 1 for r in priced]
    assert len(errs) == rows
    return sum(map(abs, errs)) / len(errs), sum(errs) / len(errs)
