"""The shipped serving measurements cut to the rows a test scores (``validate.serving_score``),
shared by the tests that price one group of them with and without a modelling choice."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

from plena_opt.validate.serving_score import shipped_serving_csv


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
