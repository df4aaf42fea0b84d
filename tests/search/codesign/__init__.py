"""Tests of ``plena_opt.search.codesign.codesign``."""
