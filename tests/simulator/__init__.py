"""Tests of ``plena_opt.simulator``."""
