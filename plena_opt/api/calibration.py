"""Calibration overlays in the use cases: read a ``plena-opt calibrate`` file and apply it.

``load_overlay(path) -> CalibrationOverlay`` (bounded, typed, refused naming the field) and
``applied(overlay)`` (a context: every engine model the use cases build for a GPU plan takes the
overlay's fitted ``host_step_seconds`` for its engine and chip; see ``serving.calibration``).
``overlay_flag(path)``: the overlay of a server's ``--calibration`` flag (``plena-opt serve``,
``plena-opt ui``), read once at start and in force for every request the server prices.
"""

from plena_opt.errors import PlenaInputError
from plena_opt.serving.calibration import CalibrationOverlay, applied, load_overlay

__all__ = ["CalibrationOverlay", "applied", "load_overlay", "overlay_flag"]


def overlay_flag(path: str | None) -> CalibrationOverlay | None:
    """The ``--calibration`` overlay at ``path`` (None: none given); a damaged or unreadable
    one raises naming the flag (``--calibration FILE: field: rule``; CLI exit 2)."""
    if path is None:
        return None
    try:
        return load_overlay(path)
    except PlenaInputError as exc:
        said = str(exc) if exc.field in str(exc) else f"{exc.field}: {exc}"
        raise PlenaInputError(exc.field, f"--calibration {path}: {said}") from None
