"""Serving decisions in the search: KV-capacity batches, SLA, goodput, aggregated vs disaggregated
fronts, the Optuna pair search, mixed GPU pools.
"""
