"""Tests of ``plena_opt.chip``."""
