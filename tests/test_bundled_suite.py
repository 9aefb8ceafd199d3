"""The bundled suite stays calibrated: GOLD resolves every instance, EMPTY none (and its verify fails)."""

from __future__ import annotations

from pathlib import Path

INSTANCES = Path(__file__).resolve().parent.parent / "instances"


def test_bundled_instances_are_calibrated(suite):
    result = suite.run(f"--arena-instances={INSTANCES}", "--arena-arms=GOLD,EMPTY", "-n", "2")
    rows = suite.ledger()
    count = len({row["instance_id"] for row in rows})
    assert count >= 8
    result.assert_outcomes(passed=count, failed=count)
    for row in rows:
        if row["arm"] == "GOLD":
            assert row["status"] == "resolved", row
            assert row["patch_lines"] > 0
        else:
            assert row["status"] == "unresolved", row
            assert row["verify"]["passed"] is False, f"{row['instance_id']}: verify passes on the untouched base"
