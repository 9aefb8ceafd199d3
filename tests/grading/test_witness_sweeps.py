"""The verdict cannot be written by the code under test (issue 27), in whole sweeps, with and without ``-n 2``.

Each hostile ``command`` arm (``data/hostile/verdict_arm.py``) leaves ``calc.mul`` broken and writes one attack of
``data/hostile/verdict_writers.py`` into its workspace: ``os._exit(0)`` on import or at exit, a JUnit report
rewritten at exit, ``PASSED`` lines forged through ``/proc/self/fd/1``, a hook wrapper on pytest's live ``Config``
found through ``gc``, a stdlib-shadowing ``difflib.py`` that sets ``PYTEST_ADDOPTS``, a ``*.dist-info`` with a
``pytest11`` entry point. One sweep grades every attack on four rows of the same repository, one per grading mode:
a ``verify`` command, the default JUnit runner, a SWE-bench runner with a ``log_parser``, and ``-rA`` lines; the
``GOLD`` arm on the same rows shows the witnesses do not refuse an honest run. The real sandbox, real pytest, the
real controller (``tests/grading/test_witnesses.py`` grades the same attacks cell by cell).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest
from helpers.agents import arm_table
from helpers.arena import XDIST

from pytest_swe_arena.cell.sandbox import probe_bwrap

sys.path.insert(0, str(Path(__file__).parents[1] / "data" / "hostile"))
from verdict_writers import ATTACKS, MODES, TESTS  # noqa: E402

ARM = Path(__file__).parents[1] / "data" / "hostile" / "verdict_arm.py"

pytestmark = pytest.mark.skipif(not probe_bwrap().works, reason=f"bwrap does not work here: {probe_bwrap().problem}")


def arm_name(attack: str) -> str:
    return attack.upper().replace("_", "")


def encoded(files: dict[str, str]) -> str:
    """The attack's files for the arm's command line (base64: no braces for the placeholders)."""
    return base64.b64encode(json.dumps(files).encode()).decode()


def rows(calc) -> list[dict]:
    found = []
    for number, fields in enumerate(MODES.values(), start=1):
        row = calc.row(f"demo__calc-{number}", FAIL_TO_PASS=TESTS[:1], PASS_TO_PASS=TESTS[1:], **fields)
        if "verify" not in fields:
            del row["verify"]
        found.append(row)
    return found


@pytest.mark.parametrize("workers", XDIST)
def test_no_attack_on_the_verdict_resolves_a_cell_in_any_grading_mode(suite, calc, workers):
    suite.instances(rows(calc))
    suite.arms_toml = "".join(arm_table(arm_name(attack), "command", command=[sys.executable, str(ARM), encoded(files)])
                              for attack, (files, _) in ATTACKS.items())
    arms = ",".join([*map(arm_name, ATTACKS), "GOLD"])
    result = suite.run(f"--arena-arms={arms}", *workers)
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output, output[-3000:]
    mode_of = {f"demo__calc-{number}": mode for number, mode in enumerate(MODES, start=1)}
    ledger = suite.ledger()
    assert len(ledger) == len(MODES) * (len(ATTACKS) + 1), output[-3000:]
    won = []
    assert all(row["status"] in ("resolved", "unresolved") for row in ledger), [
        (row["arm"], row["status"], row["error"]) for row in ledger]
    for row in ledger:
        mode = mode_of[row["instance_id"]]
        if row["arm"] == "GOLD":
            assert row["status"] == "resolved", (mode, row["error"], row["details"])
            continue
        attack = next(attack for attack in ATTACKS if arm_name(attack) == row["arm"])
        flags = [flag["kind"] for flag in row["details"].get("integrity", [])]
        if row["status"] == "resolved" or (mode in ATTACKS[attack][1] and not flags):
            won.append((attack, mode, row["status"], flags))
    assert won == [], won
