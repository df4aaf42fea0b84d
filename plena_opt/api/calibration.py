"""Calibration overlays in the use cases: read a ``plena-opt calibrate`` file and apply it.

``load_overlay(path) -> CalibrationOverlay`` (bounded, typed, refused naming the field) and
``applied(overlay)`` (a context: every engine model the use cases build for a GPU plan takes the
overlay's fitted ``host_step_seconds`` for its engine and chip; see ``serving.calibration``).
"""

from plena_opt.serving.calibration import CalibrationOverlay, applied, load_overlay

__all__ = ["CalibrationOverlay", "applied", "load_overlay"]
