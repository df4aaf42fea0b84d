"""Tests of ``plena_opt.estimate``."""
