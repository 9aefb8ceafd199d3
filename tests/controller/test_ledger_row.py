"""The one model of a ledger row (``ledger.row.LedgerRow``): the writer builds through it, the shipped schema is it."""

from __future__ import annotations

import dataclasses
from importlib import resources

import pytest

from pytest_swe_arena.ledger.reader import CellRecord
from pytest_swe_arena.ledger.row import ROW_FIELDS, ledger_schema, schema_text
from pytest_swe_arena.ledger.writer import ledger_row
from pytest_swe_arena.outcome import CellOutcome, CellStatus

#: An outcome's fields the writer writes as files, not into the row.
WRITTEN_AS_FILES = {"patch", "logs", "instance"}


def outcome() -> CellOutcome:
    return CellOutcome(cell_key="0" * 24, instance_id="proj__x-1", arm="SOLO", trial=1, status=CellStatus.RESOLVED,
                       nodeid="suite.jsonl::proj__x-1[SOLO]", arm_identity={"name": "SOLO", "kind": "gold",
                                                                            "settings": {}},
                       provenance={"plugin_version": "0"}, patch=b"x\n", patch_scored=True)


def test_the_shipped_schema_is_the_one_the_model_makes() -> None:
    shipped = resources.files("pytest_swe_arena").joinpath("schemas/ledger.schema.json").read_text()
    assert shipped == schema_text(), \
        "regenerate it: python -m pytest_swe_arena.ledger.row > pytest_swe_arena/schemas/ledger.schema.json"


def test_every_outcome_field_but_its_files_is_a_row_field_and_the_writer_adds_the_rest() -> None:
    from_outcome = {field.name for field in dataclasses.fields(CellOutcome)} - WRITTEN_AS_FILES
    added = {"schema_version", "run_id", "patch_lines", "patch_sha256", "patch_file", "run_dir"}
    assert from_outcome | added | {"chain_sha256"} == ROW_FIELDS
    row = ledger_row(outcome(), "run-1", "patches/p", "runs/p")
    assert set(row) == ROW_FIELDS - {"chain_sha256"}  # sealed into the chain when appended


def test_an_outcome_field_the_row_does_not_declare_stops_the_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = CellOutcome.to_json
    monkeypatch.setattr(CellOutcome, "to_json", lambda self: {**plain(self), "sandbox_profile": "strict"})
    with pytest.raises(TypeError, match="sandbox_profile"):
        ledger_row(outcome(), "run-1", None, None)


def test_a_written_row_is_valid_under_the_schema_and_every_field_is_described() -> None:
    import jsonschema

    schema = ledger_schema()
    jsonschema.Draft202012Validator(schema).validate(ledger_row(outcome(), "run-1", None, None))
    for where, node in [("row", schema), *schema["$defs"].items()]:
        for name, field in node.get("properties", {}).items():
            assert field.get("description"), f"{where}.{name} has no description beside its declaration"


def test_the_readers_read_only_fields_the_row_declares() -> None:
    from pytest_swe_arena.results.viewer.rows import ViewerRow

    assert set(CellRecord.__struct_fields__) <= ROW_FIELDS
    assert set(ViewerRow.__struct_fields__) - {"offset", "page"} <= ROW_FIELDS  # where its line is: not the row's
