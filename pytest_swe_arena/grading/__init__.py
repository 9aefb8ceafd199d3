"""grading."""
