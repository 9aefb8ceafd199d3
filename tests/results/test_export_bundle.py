"""``swe-arena export OUT --to DIR``'s bundle, from an out dir laid out by hand: predictions, rows, ATIF files,
and a cell's ATIF file that is a link (refused at the crossing, never followed)."""

from __future__ import annotations

import json
import warnings

from pytest_swe_arena.results.outputs import write_export
from pytest_swe_arena.transcripts.atif import ATIF_FILE


def cell_row(instance_id, arm, trial=0, atif=True):
    """A row of ``trial`` in a repeated sweep (0: a sweep that does not repeat its cells)."""
    run_dir = f"runs/{instance_id}/{arm}" + (f"/r{trial}" if trial else "")
    return {"instance_id": instance_id, "arm": arm, "trial": trial or 1, "status": "resolved", "run_dir": run_dir,
            "patch_file": f"patches/{instance_id}.{arm.lower()}" + (f".r{trial}" if trial else "") + ".patch",
            "details": {"atif": ATIF_FILE} if atif else {"atif_missing": "the run dir holds no record of the agent"}}


def lay_out(out, rows):
    for row in rows:
        (out / row["patch_file"]).parent.mkdir(parents=True, exist_ok=True)
        (out / row["patch_file"]).write_text(f"patch of {row['instance_id']} {row['arm']}\n")
        (out / row["run_dir"]).mkdir(parents=True, exist_ok=True)
        if "atif" in row["details"]:
            (out / row["run_dir"] / ATIF_FILE).write_text(json.dumps({"session_id": row["run_dir"]}))


def test_the_bundle_holds_predictions_rows_and_one_atif_file_per_cell(tmp_path):
    out, to = tmp_path / "out", tmp_path / "bundle"
    rows = [cell_row("a-1", "SOLO", 1), cell_row("a-1", "SOLO", 2), cell_row("b-2", "CLAUDE"),
            cell_row("b-2", "GOLD", atif=False)]
    lay_out(out, rows)
    written = write_export(rows, out, to)
    assert [path.relative_to(to).as_posix() for path in written] == [
        "predictions.jsonl", "ledger.jsonl", "trajectories/a-1/SOLO/1.atif.json", "trajectories/a-1/SOLO/2.atif.json",
        "trajectories/b-2/CLAUDE/1.atif.json"]
    predictions = [json.loads(line) for line in (to / "predictions.jsonl").read_text().splitlines()]
    assert [(p["model_name_or_path"], p["instance_id"]) for p in predictions] == [
        ("CLAUDE", "b-2"), ("GOLD", "b-2"), ("SOLO.r1", "a-1"), ("SOLO.r2", "a-1")]
    assert predictions[0]["model_patch"] == "patch of b-2 CLAUDE\n"
    assert [json.loads(line) for line in (to / "ledger.jsonl").read_text().splitlines()] == rows
    assert json.loads((to / "trajectories/a-1/SOLO/2.atif.json").read_text()) == {"session_id": "runs/a-1/SOLO/r2"}
    assert json.loads((to / "trajectories/b-2/CLAUDE/1.atif.json").read_text()) == {"session_id": "runs/b-2/CLAUDE"}


def test_a_cells_atif_file_that_is_a_link_is_not_followed(tmp_path):
    out, to = tmp_path / "out", tmp_path / "bundle"
    secret = tmp_path / "host-secret"
    secret.write_text("HOST-SECRET")
    rows = [cell_row("a-1", "SOLO")]
    lay_out(out, rows)
    (out / rows[0]["run_dir"] / ATIF_FILE).unlink()
    (out / rows[0]["run_dir"] / ATIF_FILE).symlink_to(secret)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        written = write_export(rows, out, to)
    assert [path.name for path in written] == ["predictions.jsonl", "ledger.jsonl"]
    assert not (to / "trajectories").exists() or "HOST-SECRET" not in "".join(
        path.read_text() for path in (to / "trajectories").rglob("*") if path.is_file())
    assert any("a-1[SOLO]: its ATIF file is not exported" in str(warning.message) for warning in caught)
