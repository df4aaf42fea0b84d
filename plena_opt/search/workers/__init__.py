"""Many worker processes on one study: the work queue, claims and heartbeats, plan chunks and co-
design points as work units.
"""
