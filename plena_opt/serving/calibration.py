"""A calibration overlay: a user's own fitted values of the serving model's named constants.

``plena-opt calibrate`` fits, per engine and GPU chip, the one global constant the serving model
exposes, ``host_step_seconds`` (``serving.engines.EngineModel``: host time added to every engine
step, 0 in the shipped engines), on a user's benchmark results, and writes them as this typed
file. ``--calibration overlay.json`` applies it while a command runs (:func:`applied`): every
engine model the use cases build for a GPU plan passes through :func:`calibrated`, which replaces
the constant where the overlay has an entry for that (engine, chip) and changes nothing otherwise
(no overlay: nothing changes, so every golden stays exact).

The file is bounded (:data:`MAX_OVERLAY_BYTES`, :data:`MAX_CONSTANTS`), versioned
(:data:`OVERLAY_VERSION`), and refused naming the field on an unknown key or a value out of range.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from plena_opt.errors import PlenaInputError, echo, name_list

if TYPE_CHECKING:
    from plena_opt.serving.engines import EngineModel

OVERLAY_VERSION = 1
MAX_OVERLAY_BYTES = 1 << 20  # an overlay holds a few dozen constants: 1 MiB is ample
MAX_CONSTANTS = 256  # (engine, chip) pairs one overlay may hold
MAX_HOST_STEP_SECONDS = 0.5  # EngineModel refuses >= 1 s; a host step of 0.5 s is no engine's
CONSTANT_NAMES = ("host_step_seconds",)  # the serving model's named constants an overlay sets


class _Strict(BaseModel):
    # strict: a quoted number or a boolean count is refused naming its field, not coerced; every
    # figure finite (an integer is still a valid float)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class HoldOut(_Strict):
    """The hold-out split: rows it held, how they were chosen, and MAPE (%) before and after."""

    seed: int
    fraction: float = Field(gt=0, lt=1)
    by: Literal["deployment", "run"]
    groups: int = Field(ge=0)
    rows: int = Field(ge=0)
    ttft_mape_before: float | None = Field(default=None, ge=0)
    ttft_mape_after: float | None = Field(default=None, ge=0)
    tpot_mape_before: float | None = Field(default=None, ge=0)
    tpot_mape_after: float | None = Field(default=None, ge=0)


class FittedConstant(_Strict):
    """One constant of one (engine, chip): its fitted value (SI), the default it replaces, the
    rows it was fitted on, and the hold-out MAPE (%) of that (engine, chip)'s rows before/after."""

    name: Literal["host_step_seconds"]
    engine: Literal["vllm", "sglang", "trtllm"]
    chip: str = Field(min_length=1, max_length=64)
    value: float = Field(ge=0, le=MAX_HOST_STEP_SECONDS)
    default: float = Field(ge=0, le=MAX_HOST_STEP_SECONDS)
    unit: Literal["s"] = "s"
    fitted_on_rows: int = Field(ge=1)
    holdout_rows: int = Field(ge=0)
    holdout_ttft_mape_before: float | None = Field(default=None, ge=0)
    holdout_ttft_mape_after: float | None = Field(default=None, ge=0)
    holdout_tpot_mape_before: float | None = Field(default=None, ge=0)
    holdout_tpot_mape_after: float | None = Field(default=None, ge=0)


class CalibrationOverlay(_Strict):
    """A ``plena-opt calibrate`` result: the fitted constants, what they were fitted on, and the
    hold-out figures of the whole file."""

    version: Literal[1]
    fitted_on: str = Field(max_length=256)  # the measurements file's name
    rows_priced: int = Field(ge=0)
    holdout: HoldOut
    constants: list[FittedConstant] = Field(max_length=MAX_CONSTANTS)

    def host_step_seconds(self, engine: str, chip: str) -> float | None:
        """The fitted host time per step (s) of ``engine`` on ``chip``; None: not fitted."""
        for c in self.constants:
            if c.engine == engine and c.chip == chip and c.name == "host_step_seconds":
                return c.value
        return None

    def to_json(self) -> str:
        """The overlay as a JSON document (what :func:`load_overlay` reads back)."""
        from plena_opt.jsonio import dumps

        return dumps(self.model_dump(mode="json"), indent=2)


def not_found_rule(name: str, valid: set[str]) -> str:
    """The rule of an unknown GPU chip name (the valid names listed, bounded)."""
    return f"unknown GPU chip {echo(name)}; built-in GPU chips: {name_list(sorted(valid))}"


def _field_of(err: dict) -> str:
    return ".".join(str(p) for p in err["loc"]) or "calibration"


def parse_overlay(doc: object) -> CalibrationOverlay:
    """A parsed overlay document, or a :class:`PlenaInputError` naming the first bad field."""
    if not isinstance(doc, dict):
        raise PlenaInputError("calibration", "an overlay is a JSON object")
    if doc.get("version") != OVERLAY_VERSION:
        got = str(doc.get("version"))[:16]
        raise PlenaInputError("calibration.version", f"must be {OVERLAY_VERSION}; got {got}")
    try:
        ov = CalibrationOverlay.model_validate(doc)
    except ValidationError as exc:
        e = exc.errors()[0]
        field = _field_of(e)
        raise PlenaInputError(f"calibration.{field}", e["msg"]) from None
    from plena_opt.chip.gpu.profile import gpu_profile_names

    gpus, seen = set(gpu_profile_names()), set()
    for i, c in enumerate(ov.constants):
        if c.chip not in gpus:
            raise PlenaInputError(f"calibration.constants.{i}.chip", not_found_rule(c.chip, gpus))
        if (c.name, c.engine, c.chip) in seen:
            raise PlenaInputError(
                f"calibration.constants.{i}", f"{c.name} of {c.engine} on {c.chip} given twice"
            )
        seen.add((c.name, c.engine, c.chip))
    return ov


def load_overlay(path: str | Path) -> CalibrationOverlay:
    """Read and check the overlay file ``path`` (bounded; errors name ``calibration``)."""
    from plena_opt.jsonio import read_user_text

    text = read_user_text(path, "calibration", "calibration overlay", MAX_OVERLAY_BYTES)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlenaInputError("calibration", f"not JSON: {exc.msg} (line {exc.lineno})") from None
    return parse_overlay(doc)


_lock = threading.Lock()
_active: list[CalibrationOverlay] = []  # process-wide (search threads see it); innermost last


@contextmanager
def applied(overlay: CalibrationOverlay | None) -> Iterator[None]:
    """Apply ``overlay`` to every engine model built inside the block (None: no change)."""
    if overlay is None:
        yield
        return
    with _lock:
        _active.append(overlay)
    try:
        yield
    finally:
        with _lock:
            _active.remove(overlay)


def active() -> CalibrationOverlay | None:
    """The overlay in force, if any."""
    return _active[-1] if _active else None


def calibrated(eng: EngineModel, chip: str) -> EngineModel:
    """``eng`` on ``chip``: its decode-kernel constant (``serving.kernel_scale``), then the
    active overlay's constants for (its engine, ``chip``) when an overlay is in force and has
    an entry for them."""
    from plena_opt.serving.kernel_scale import decode_scale, scale_note

    scale = decode_scale(eng.name, chip)
    if scale != eng.decode_kernel_scale:  # said where the engine's settings are cited
        eng = replace(eng, decode_kernel_scale=scale,
                      source=f"{eng.source}; {scale_note(eng.name, chip)}")  # fmt: skip
    ov = active()
    if ov is None:
        return eng
    host = ov.host_step_seconds(eng.name, chip)
    return eng if host is None else replace(eng, host_step_seconds=host)
