"""Tests of ``plena_opt.search.workers.workers``."""
