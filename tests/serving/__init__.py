"""Tests of ``plena_opt.serving``."""
