"""Pareto fronts: non-dominance (in memory and in chunks), hypervolume, front quality against the
exact front.
"""
