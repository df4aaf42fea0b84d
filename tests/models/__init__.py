"""Tests of ``plena_opt.models``."""
