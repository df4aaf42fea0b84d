"""Where studies live: stores (journal file, RDB, gRPC proxy) and their care, scored plans as Optuna
trials, bulk writes, front-only chunk records, the dashboard.
"""
