"""estimate package."""
