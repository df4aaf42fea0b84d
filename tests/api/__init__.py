"""Tests of ``plena_opt.api``."""
