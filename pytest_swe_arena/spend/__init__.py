"""spend."""
