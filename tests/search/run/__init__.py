"""Tests of ``plena_opt.search.run``."""
