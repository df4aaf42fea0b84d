"""Tests of ``plena_opt.search.storage.storage``."""
