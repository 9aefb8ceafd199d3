"""instances."""
