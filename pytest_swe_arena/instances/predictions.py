"""SWE-bench predictions files, in every form SWE-bench's ``run_evaluation`` reads.

JSON Lines or a JSON array of ``{instance_id, model_name_or_path, model_patch}``, a JSON object keyed by
instance id (SWE-agent's ``preds.json``), or the word ``"gold"`` (each instance's own gold patch). Read by
the ``replay`` kind and by ``swe-arena evaluate``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .loading import read_rows
from .model import InstanceFileError


class PredictionsError(ValueError):
    """A predictions file that cannot be read as one; the message names the file and the line or key."""


#: The forms a predictions file may take, named in every error about one.
PREDICTION_FORMS = ("JSON Lines or a JSON array of {instance_id, model_name_or_path, model_patch} objects, "
                    "a JSON object keyed by instance id (SWE-agent's preds.json), or the word \"gold\"")
#: ``predictions = "gold"``: each instance's own gold patch, as SWE-bench's ``--predictions_path gold``.
GOLD = "gold"


def load_predictions(path: Path) -> dict[str, dict[str, Any]]:
    """``instance_id -> prediction`` from a SWE-bench predictions file; errors name file and line (or key)."""
    if not path.is_file():
        raise PredictionsError(f"{path} does not exist; a predictions file is {PREDICTION_FORMS}")
    try:
        rows: list[tuple[int | str, Any]] = list(read_rows(path))
    except InstanceFileError as error:
        raise PredictionsError(f"{error}; a predictions file is {PREDICTION_FORMS}") from None
    if path.suffix != ".jsonl" and len(rows) == 1 and _keyed_by_instance(rows[0][1]):
        keyed = rows[0][1]
        for key, value in keyed.items():
            if value.get("instance_id", key) != key:
                raise PredictionsError(f"{path}, key {key!r}: its prediction names instance "
                                       f"{value['instance_id']!r}; in a JSON object keyed by instance id "
                                       "each prediction is its own key's (or names none)")
        rows = [(f"key {key!r}", {**value, "instance_id": key}) for key, value in keyed.items()]
    predictions: dict[str, dict[str, Any]] = {}
    for line, row in rows:
        where = f"{path}:{line}" if isinstance(line, int) else f"{path}, {line}"
        if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str):
            raise PredictionsError(f"{where}: expected an object with 'instance_id' and 'model_patch'; "
                                   f"a predictions file is {PREDICTION_FORMS}")
        patch = row.get("model_patch")
        if patch is not None and not isinstance(patch, str):
            raise PredictionsError(f"{where}: field 'model_patch' must be a string or null")
        predictions[row["instance_id"]] = row
    return predictions


def _keyed_by_instance(value: object) -> bool:
    """A JSON object of predictions keyed by instance id (SWE-agent's ``preds.json``), not one prediction."""
    return (isinstance(value, dict) and "instance_id" not in value and bool(value)
            and all(isinstance(row, dict) for row in value.values()))
