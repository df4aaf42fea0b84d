"""Accuracy scorecard against shipped public measurements, and the kernel-level calibration."""

from plena_opt.validate.scorecard import ModelScore, Point, Scorecard, run_scorecard

__all__ = ["ModelScore", "Point", "Scorecard", "run_scorecard"]
