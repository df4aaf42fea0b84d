"""One search run: the runner, the session state, how the budget is spent (modes, the sampler loop)
and the rendering of the result.
"""
