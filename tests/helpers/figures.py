"""The figures a test measures for an issue's closing note, kept where a note can read them back."""

from __future__ import annotations

import json
import os
from typing import Any


def record_figures(label: str, variable: str, figures: dict[str, Any]) -> None:
    """Print ``figures`` (seen with ``pytest -s``) and append them as a JSON line to the file ``$variable`` names."""
    print(f"{label}:", json.dumps(figures))
    target = os.environ.get(variable)
    if target:
        with open(target, "a") as out:
            out.write(json.dumps(figures) + "\n")
