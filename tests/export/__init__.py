"""Tests of ``plena_opt.export``."""
