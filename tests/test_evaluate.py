"""``swe-arena evaluate``: SWE-bench's ``run_evaluation`` command line in, SWE-bench's outputs out.

The key sets are SWE-bench 5.0.2's (``swebench/harness/reporting.py`` ``make_run_report`` and
``grading.py`` ``get_eval_report``), written out here so a change on either side shows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers.gitrepos import LITE_DATA, calc_project, diff_of, unbundle_shallow

REPO_ROOT = Path(__file__).resolve().parents[1]
BUNDLED = REPO_ROOT / "instances" / "suite.jsonl"

#: make_run_report's keys (without a Docker client), in its order.
RUN_REPORT_KEYS = [
    "total_instances", "submitted_instances", "completed_instances", "resolved_instances", "unresolved_instances",
    "infra_failure_instances", "ambiguous_failure_instances", "empty_patch_instances", "error_instances",
    "completed_ids", "incomplete_ids", "empty_patch_ids", "submitted_ids", "resolved_ids", "unresolved_ids",
    "infra_failure_ids", "ambiguous_failure_ids", "failure_reasons", "error_ids", "schema_version",
]
#: get_eval_report's keys for an instance whose tests ran, and its tests_status lists.
INSTANCE_REPORT_KEYS = {"patch_is_None", "patch_exists", "patch_successfully_applied", "resolved", "infra_failure",
                        "tests_status"}
TESTS_STATUS_KEYS = {"FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL", "PASS_TO_FAIL"}


def evaluate(cwd: Path, *args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_swe_arena.cli", "evaluate", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, check=False, env=env)


def test_gold_on_the_bundled_rows_writes_swebench_report_and_logs(tmp_path: Path) -> None:
    ids = ["arena__calcy-58", "arena__inikit-27", "arena__slugkit-112", "arena__unitconv-64"]
    done = evaluate(tmp_path, "--dataset_name", BUNDLED, "--predictions_path", "gold", "--run_id", "gold-check",
                    "--max_workers", "2", "--instance_ids", *ids, "--cache_level", "env", "--report_dir", "reports")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "--cache_level only mean" in done.stderr  # a Docker-only flag is accepted and said to be unused
    report = json.loads((tmp_path / "reports" / "gold.gold-check.json").read_text())
    assert list(report) == RUN_REPORT_KEYS
    assert report["resolved_ids"] == report["completed_ids"] == report["submitted_ids"] == sorted(ids)
    assert report["total_instances"] == report["resolved_instances"] == 4 and report["schema_version"] == 2
    for instance_id in ids:
        folder = tmp_path / "logs" / "run_evaluation" / "gold-check" / "gold" / instance_id
        assert sorted(path.name for path in folder.iterdir()) == ["patch.diff", "report.json", "run_instance.log",
                                                                  "test_output.txt"]
        (entry,) = json.loads((folder / "report.json").read_text()).items()
        assert entry[0] == instance_id
        assert set(entry[1]) == INSTANCE_REPORT_KEYS and entry[1]["resolved"] is True
        assert set(entry[1]["tests_status"]) == TESTS_STATUS_KEYS
        assert (folder / "test_output.txt").stat().st_size > 0
        assert "apply method: git apply" in (folder / "run_instance.log").read_text()


def test_gold_on_a_real_lite_row_resolves_it_in_swebench_report(tmp_path: Path) -> None:
    """A SWE-bench Lite row as the dataset ships it, its repository under ``--repos``, its environment the
    shipped spec's (built from the package index)."""
    (row,) = [row for row in json.loads((LITE_DATA / "rows.json").read_text())
              if row["instance_id"] == "pallets__flask-4992"]
    unbundle_shallow(LITE_DATA / "pallets__flask.bundle", tmp_path / "repos" / "pallets__flask",
                     [row["base_commit"], row["environment_setup_commit"]])
    (tmp_path / "lite.json").write_text(json.dumps([row]))
    private_cache = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}  # mirrors made from tmp_path's repos
    done = evaluate(tmp_path, "-d", "lite.json", "-p", "gold", "-id", "lite", "--repos", "repos",
                    "--max_workers", "1", env=private_cache)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "gold.lite.json").read_text())
    assert list(report) == RUN_REPORT_KEYS
    assert report["resolved_ids"] == report["completed_ids"] == ["pallets__flask-4992"]
    assert report["error_ids"] == report["empty_patch_ids"] == report["infra_failure_ids"] == []
    folder = tmp_path / "logs" / "run_evaluation" / "lite" / "gold" / "pallets__flask-4992"
    (entry,) = json.loads((folder / "report.json").read_text()).values()
    assert set(entry) == INSTANCE_REPORT_KEYS and set(entry["tests_status"]) == TESTS_STATUS_KEYS
    assert entry["tests_status"]["FAIL_TO_PASS"] == {"success": json.loads(row["FAIL_TO_PASS"]), "failure": []}
    assert entry["tests_status"]["PASS_TO_PASS"] == {"success": json.loads(row["PASS_TO_PASS"]), "failure": []}
    assert entry["patch_successfully_applied"] is True and entry["resolved"] is True


def test_each_outcome_is_filed_as_swebench_files_it(tmp_path: Path) -> None:
    calc = calc_project(tmp_path / "repos")
    # Graded test by test (no verify command): the default runner, so report.json's tests_status is filled.
    graded = {"FAIL_TO_PASS": ["tests/test_ops.py::test_mul"], "PASS_TO_PASS": ["tests/test_ops.py::test_add"]}
    rows = [calc.row(f"demo__calc-{name}", **graded) for name in ("fixed", "broken", "empty", "unapplied", "none")]
    for row in rows:
        del row["verify"]
    dataset = tmp_path / "dataset.json"
    dataset.write_text(json.dumps(rows))
    broken_ops = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
    breaks_add = diff_of(calc.repo, {"calc/ops.py": broken_ops})
    preds = [{"instance_id": "demo__calc-fixed", "model_name_or_path": "org/m-1", "model_patch": calc.patch},
             {"instance_id": "demo__calc-broken", "model_name_or_path": "org/m-1", "model_patch": breaks_add},
             {"instance_id": "demo__calc-empty", "model_name_or_path": "org/m-1", "model_patch": ""},
             {"instance_id": "demo__calc-unapplied", "model_name_or_path": "org/m-1",
              "model_patch": calc.patch.replace("a + b", "a % b")}]
    (tmp_path / "preds.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    done = evaluate(tmp_path, "-d", dataset, "-p", "preds.jsonl", "-id", "mixed", "--max_workers", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "org__m-1.mixed.json").read_text())
    assert report["resolved_ids"] == ["demo__calc-fixed"]
    assert report["unresolved_ids"] == ["demo__calc-broken"]
    assert report["empty_patch_ids"] == ["demo__calc-empty"]
    assert report["error_ids"] == ["demo__calc-unapplied"]
    assert report["incomplete_ids"] == ["demo__calc-none"]
    assert report["completed_ids"] == ["demo__calc-broken", "demo__calc-fixed"]
    assert (report["total_instances"], report["submitted_instances"]) == (5, 4)
    logs = tmp_path / "logs" / "run_evaluation" / "mixed" / "org__m-1"
    broken = json.loads((logs / "demo__calc-broken" / "report.json").read_text())["demo__calc-broken"]
    assert broken["tests_status"]["PASS_TO_PASS"] == {"success": [], "failure": ["tests/test_ops.py::test_add"]}
    assert broken["tests_status"]["FAIL_TO_PASS"] == {"success": ["tests/test_ops.py::test_mul"], "failure": []}
    assert not (logs / "demo__calc-unapplied" / "report.json").exists()  # SWE-bench: no report, an error
    assert "apply attempt fuzz failed" in (logs / "demo__calc-unapplied" / "run_instance.log").read_text()
    assert not (logs / "demo__calc-empty").exists()  # never run, as SWE-bench does not run it
    # A user moving over checks the harness reproduces the report they have, instance by instance.
    compared = subprocess.run([sys.executable, "-m", "pytest_swe_arena.cli", "compare", "org__m-1.mixed.json",
                               "logs/run_evaluation/mixed/swe-arena/out"], cwd=tmp_path, capture_output=True,
                              text=True, check=False)
    assert compared.returncode == 0, compared.stderr
    paired = next(line.split() for line in compared.stdout.splitlines() if line.startswith("org__m-1"))
    assert (paired[1], paired[-3], paired[-2]) == ("3", "0", "0")  # 3 cells in both, none flipped


def test_a_malformed_predictions_file_stops_before_any_cell(tmp_path: Path) -> None:
    calc = calc_project(tmp_path / "repos")
    (tmp_path / "dataset.jsonl").write_text(json.dumps(calc.row()) + "\n")
    (tmp_path / "preds.jsonl").write_text('{"instance_id": "demo__calc-1", "model_patch": 7}\n')
    done = evaluate(tmp_path, "-d", "dataset.jsonl", "-p", "preds.jsonl", "-id", "bad")
    assert done.returncode != 0
    assert "preds.jsonl:1: field 'model_patch' must be a string or null" in done.stderr
    assert not (tmp_path / "logs" / "run_evaluation" / "bad" / "swe-arena" / "out").exists()
    done = evaluate(tmp_path, "-d", "dataset.jsonl", "-p", "preds.txt", "-id", "bad")
    assert "preds.txt does not exist; a predictions file is JSON Lines or a JSON array" in done.stderr
    done = evaluate(tmp_path, "-d", "no/such-dataset", "-p", "gold", "-id", "bad")
    assert done.returncode != 0 and "pass a local .json or .jsonl file" in done.stderr
