"""A hand-made calibration overlay of one constant (what applies, not how it was fitted), shared by
the tests of ``--calibration`` on the CLI, the gRPC server and the web UI."""

from __future__ import annotations


def one_constant_overlay(engine: str, chip: str, value: float) -> dict:
    """The overlay document (``plena-opt calibrate --out``'s schema) setting ``host_step_seconds``
    of ``engine`` on ``chip`` to ``value`` seconds."""
    return {
        "version": 1, "fitted_on": "hand.csv", "rows_priced": 2,
        "holdout": {"seed": 0, "fraction": 0.25, "by": "deployment", "groups": 1, "rows": 1},
        "constants": [{"name": "host_step_seconds", "engine": engine, "chip": chip,
                       "value": value, "default": 0.0, "fitted_on_rows": 1, "holdout_rows": 1}],
    }  # fmt: skip
