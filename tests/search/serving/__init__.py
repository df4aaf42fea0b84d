"""Tests of ``plena_opt.search.serving.serving``."""
