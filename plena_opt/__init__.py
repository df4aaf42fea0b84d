"""plena-opt: choose parallelism plans for LLM serving on PLENA accelerator clusters."""

__version__ = "0.1.0"
