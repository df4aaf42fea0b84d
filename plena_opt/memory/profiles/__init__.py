"""Built-in memory profiles (JSON, analytic-model §3.2)."""
