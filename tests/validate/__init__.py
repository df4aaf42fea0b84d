"""Tests of ``plena_opt.validate``."""
