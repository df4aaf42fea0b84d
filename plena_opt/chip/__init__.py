"""chip package."""
