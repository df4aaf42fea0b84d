"""The plan space a search walks: points, objectives and constraints (and their Optuna adapter),
samplers, local refinement of a front, infeasible-plan reports.
"""
