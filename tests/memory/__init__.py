"""Tests of ``plena_opt.memory``."""
