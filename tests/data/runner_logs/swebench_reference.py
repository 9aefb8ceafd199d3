"""Write what SWE-bench's own parsers and grading say about each log of this corpus into its JSON.

Run with a Python that has ``swebench==5.0.2`` installed (not one of this project's dependencies):

    python -m venv /tmp/swebench && /tmp/swebench/bin/pip install swebench==5.0.2
    /tmp/swebench/bin/python tests/data/runner_logs/swebench_reference.py

For each ``NAME.json`` beside ``NAME.log`` it fills the ``swebench`` field: the status map each parser
in ``log_parsers`` gives the log, and for each case (a FAIL_TO_PASS / PASS_TO_PASS pair graded with one
parser) whether SWE-bench's grading resolves it. A log without SWE-bench's output markers is graded as
its eval script would have printed it: between the markers, with the runner's exit status after them.
"""

from __future__ import annotations

import json
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT, TEST_EXIT_CODE
from swebench.harness.grading import get_eval_report
from swebench.harness.log_parsers import PARSER_REGISTRY
from swebench.types import TestSpec

HERE = Path(__file__).parent
VERSION = "5.0.2"


def as_eval_log(log: str, returncode: int | None) -> str:
    """The log as SWE-bench's eval script prints it (``set -x`` shows the markers), if it is not already."""
    if START_TEST_OUTPUT in log:
        return log
    exit_line = [] if returncode is None else [f"{TEST_EXIT_CODE}: {returncode}"]
    return "\n".join([f"+ : '{START_TEST_OUTPUT}'", log.rstrip("\n"), f"+ : '{END_TEST_OUTPUT}'", *exit_line, ""])


def verdict(log: str, returncode: int | None, case: dict[str, Any]) -> dict[str, Any]:
    spec = TestSpec(instance_id="corpus__case-1", image="", eval_script_list=[], repo="corpus/case", version="0",
                    FAIL_TO_PASS=list(case["FAIL_TO_PASS"]), PASS_TO_PASS=list(case["PASS_TO_PASS"]),
                    log_parser=str(case["log_parser"]), eval_type="pass_and_fail")
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "test_output.txt"
        path.write_text(as_eval_log(log, returncode), encoding="utf-8")
        report = get_eval_report(spec, {"instance_id": spec.instance_id, "model_patch": "x"}, str(path), True)
    row = report[spec.instance_id]
    tests = row.get("tests_status", {})
    return {"resolved": row["resolved"], "log_believed": row["patch_successfully_applied"],
            **{kind: tests[kind] for kind in ("FAIL_TO_PASS", "PASS_TO_PASS") if kind in tests}}


def main() -> int:
    installed = metadata.version("swebench")
    if installed != VERSION:
        print(f"swebench {installed} is installed; this corpus records {VERSION}'s answers", file=sys.stderr)
        return 1
    for meta_path in sorted(HERE.glob("*.json")):
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        log = meta_path.with_suffix(".log").read_text(encoding="utf-8")
        swebench_log = as_eval_log(log, meta["returncode"])
        statuses = {}
        for parser in meta["log_parsers"]:
            parse = PARSER_REGISTRY[parser]
            # As get_logs_eval reads it: between the markers, else (nothing there) the whole log.
            section = swebench_log.split(START_TEST_OUTPUT)[1].split(END_TEST_OUTPUT)[0]
            statuses[parser] = parse(section, None) or parse(swebench_log, None)
        meta["swebench"] = {
            "version": VERSION,
            "statuses": statuses,
            "verdicts": {case["name"]: verdict(log, meta["returncode"], case) for case in meta["cases"]},
        }
        meta_path.write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{meta_path.name}: {sum(map(len, statuses.values()))} statuses, {len(meta['cases'])} cases")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
