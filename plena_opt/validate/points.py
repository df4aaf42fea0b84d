"""One scored point of the accuracy scorecard (measured against predicted) and where the shipped
measurements live. Below ``scorecard`` and the data sets it scores (``fig08``), so that these
import no module that imports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path


@dataclass(frozen=True)
class Point:
    dataset: str
    model: str
    batch_size: int
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        """Signed relative error (predicted / measured − 1)."""
        return self.predicted / self.measured - 1.0


def data_dir() -> Path:
    return Path(str(resources.files("plena_opt.validate") / "data"))
