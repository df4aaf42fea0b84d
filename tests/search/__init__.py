"""Tests of ``plena_opt.search``."""
