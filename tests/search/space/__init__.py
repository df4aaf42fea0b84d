"""Tests of ``plena_opt.search.space.space``."""
