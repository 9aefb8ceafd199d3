"""pytest-swe-arena: compare coding-agent configurations on SWE-bench-style tasks."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
