"""Tests of ``plena_opt.cli``."""
