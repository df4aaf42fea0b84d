"""Tests of ``plena_opt.web``."""
