"""Recorded patches go in as SWE-bench's harness puts them in: its apply chain, method by method.

One repository whose base commit holds a setup edit (``setup.cfg``), as a SWE-bench testbed's
environment steps leave one, and one recorded patch per path of the chain. For each, the test
runs SWE-bench's own loop (``GIT_APPLY_CMDS`` of ``swebench/harness/run_evaluation.py`` in its
order, a clean tree between attempts, then ``git apply --check --reverse``) on a plain clone, and
the replay arm's row must name the same method and reach the verdict that method gives.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers.gitrepos import commit, diff_of, git
from helpers.swebench_chain import drift_first_context_line, swebench_apply

OPS_BUG = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a + b\n"
OPS_FIX = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
TESTS = "from calc import add, mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n"
#: What ``patch`` says of the drifted patch's hunk.
FUZZ_LINE = "Hunk #1 succeeded at 3 with fuzz 1."


def swebench_method(repo: Path, base: str, patch: str, scratch: Path) -> str | None:
    """The method SWE-bench's harness applies ``patch`` with, on a clone at ``base`` (None: none does)."""
    tree = scratch / "testbed"
    subprocess.run(["git", "clone", "-q", str(repo), str(tree)], check=True)
    git(tree, "checkout", "-q", base)
    patch_file = scratch / "patch.diff"
    patch_file.write_text(patch)
    return swebench_apply(tree, patch_file)


@pytest.fixture
def setup_project(tmp_path: Path) -> tuple[Path, str, dict[str, str]]:
    """A repository whose base commit made a setup edit, and one recorded patch per path of the chain."""
    repo = tmp_path / "setup-repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    before_setup = {"calc/__init__.py": "from .ops import add, mul\n", "calc/ops.py": OPS_BUG,
                    "setup.cfg": "[tool]\nopt = 1\n", ".gitignore": "__pycache__/\n*.pyc\n.pytest_cache/\n"}
    commit(repo, before_setup, "calc")
    # A diff made in a testbed whose setup edit was not committed carries the edit: its preimage is this commit.
    carried = diff_of(repo, {"setup.cfg": "[tool]\nopt = 2\n", "calc/ops.py": OPS_FIX})
    conflicting = diff_of(repo, {"setup.cfg": "[tool]\nopt = 3\n", "calc/ops.py": OPS_FIX})
    setup_only = diff_of(repo, {"setup.cfg": "[tool]\nopt = 2\n"})
    base = commit(repo, {"setup.cfg": "[tool]\nopt = 2\n"}, "setup: opt 2")
    gold = diff_of(repo, {"calc/ops.py": OPS_FIX})
    patches = {
        "plain": gold,
        "carried-setup": carried,
        # One context line as a model writing the diff as text gets it wrong: only patch's fuzz takes it.
        "drifted": drift_first_context_line(gold),
        "conflicting": conflicting,
        # Already in the tree, and without blob names (a diff -u), so --3way cannot merge it either.
        "already": "".join(line for line in setup_only.splitlines(keepends=True) if not line.startswith("index ")),
        "empty": "",
    }
    return repo, base, patches


EXPECTED = {  # instance -> (SWE-bench's method, the row's status)
    "plain": ("git apply", "resolved"),
    "carried-setup": ("3way", "resolved"),
    "drifted": ("fuzz", "resolved"),
    "conflicting": (None, "arm_error"),
    "already": ("already applied", "unresolved"),
}


def test_recorded_patches_apply_as_swebench_applies_them(suite, setup_project, tmp_path_factory) -> None:
    repo, base, patches = setup_project
    for name, patch in patches.items():
        if name in EXPECTED:
            method = swebench_method(repo, base, patch, tmp_path_factory.mktemp(name))
            assert method == EXPECTED[name][0], f"{name}: SWE-bench's chain applies it with {method}"
    rows = [{"instance_id": f"demo__apply-{name}", "repo": "demo/apply", "base_commit": base,
             "problem_statement": "mul adds.", "source": {"git": str(repo)}, "patch": patches["plain"],
             "test_patch": diff_test(repo), "verify": "python -m pytest -q -p no:cacheprovider tests"}
            for name in patches]
    suite.instances(rows)
    # SWE-agent's preds.json: an object keyed by instance id.
    preds = {f"demo__apply-{name}": {"model_name_or_path": "m", "model_patch": patch}
             for name, patch in patches.items()}
    (suite.path / "preds.json").write_text(json.dumps(preds))
    suite.arms_toml = ('[tool.swe_arena.arms.CHAIN]\nkind = "replay"\npredictions = "preds.json"\n'
                       '[tool.swe_arena.arms.STRICT]\nkind = "replay"\npredictions = "preds.json"\napply = "strict"\n')
    result = suite.run("--arena-arms", "CHAIN,STRICT")
    ledger = {(row["instance_id"].removeprefix("demo__apply-"), row["arm"]): row for row in suite.ledger()}
    for name, (method, status) in EXPECTED.items():
        row = ledger[name, "CHAIN"]
        assert (row["provenance"].get("apply_method"), row["status"]) == (method, status), name
    assert ledger["drifted", "CHAIN"]["provenance"]["apply_fuzz"] == [FUZZ_LINE]
    attempts = ledger["conflicting", "CHAIN"]["details"]["apply_attempts"]
    assert [attempt["method"] for attempt in attempts] == ["git apply", "3way", "reject", "fuzz"]
    assert "conflict" in attempts[1]["output"].lower()
    assert ledger["empty", "CHAIN"]["status"] == "unresolved" and ledger["empty", "CHAIN"]["error"] == "empty patch"
    # apply = "strict" is git apply alone: only the plain patch goes in.
    strict = {name: ledger[name, "STRICT"]["status"] for name in EXPECTED}
    assert strict == {"plain": "resolved", "carried-setup": "arm_error", "drifted": "arm_error",
                      "conflicting": "arm_error", "already": "arm_error"}
    # Every apply that was not plain is counted per arm, warned of, and flagged in report.html and the viewer.
    arms = {arm["arm"]: arm for arm in suite.summary()["arms"]}
    assert (arms["CHAIN"]["non_plain_applies"], arms["STRICT"]["non_plain_applies"]) == (3, 0)
    result.stdout.fnmatch_lines(["  ! CHAIN: 3 recorded patch(es) applied other than by plain git apply (3way 1,"
                                 " already applied 1,",
                                 "    fuzz 1)*"])
    report = (suite.path / "arena-out/report.html").read_text()
    assert report.count('<span class="apply" title="patch applied by') == 3
    assert f'title="patch applied by fuzz: {FUZZ_LINE}"' in report
    viewer = (suite.path / "arena-out/viewer/data/overview.js").read_text()
    cells = json.loads(viewer[viewer.index("{"):viewer.rindex("}") + 1])["cells"]
    assert sorted(cells["applies"].values()) == ["3way", "already applied", f"fuzz: {FUZZ_LINE}"]
    page = (suite.path / "arena-out/viewer/data/cells/demo__apply-drifted/CHAIN/1.js").read_text()
    assert json.loads(page[page.index("{"):page.rindex("}") + 1])["apply"]["fuzz"] == [FUZZ_LINE]


def diff_test(repo: Path) -> str:
    return diff_of(repo, {"tests/test_ops.py": TESTS})


@pytest.mark.parametrize("form", ["list", "jsonl", "gold"])
def test_each_form_of_predictions_swebench_takes_is_graded(suite, calc, form) -> None:
    suite.instances([calc.row("demo__calc-1")])
    prediction = {"instance_id": "demo__calc-1", "model_name_or_path": "org/model", "model_patch": calc.patch}
    setting = {"list": "preds.json", "jsonl": "preds.jsonl", "gold": "gold"}[form]
    if form == "list":
        (suite.path / "preds.json").write_text(json.dumps([prediction]))
    elif form == "jsonl":
        (suite.path / "preds.jsonl").write_text(json.dumps(prediction) + "\n")
    suite.arms_toml = f'[tool.swe_arena.arms.PRED]\nkind = "replay"\npredictions = "{setting}"\n'
    suite.run("--arena-arms", "PRED").assert_outcomes(passed=1)
    (row,) = suite.ledger()
    assert row["status"] == "resolved"
    assert row["provenance"]["apply_method"] == "git apply"
    assert row["provenance"]["replayed_model"] == ("gold" if form == "gold" else "org/model")


def test_a_keyed_prediction_naming_another_instance_is_a_usage_error(suite, calc) -> None:
    suite.instances([calc.row()])
    (suite.path / "preds.json").write_text(json.dumps({
        "demo__calc-1": {"instance_id": "demo__calc-1", "model_patch": ""},
        "demo__calc-2": {"instance_id": "demo__calc-9", "model_patch": ""},
    }))
    suite.arms_toml = '[tool.swe_arena.arms.PRED]\nkind = "replay"\npredictions = "preds.json"\n'
    result = suite.run("--arena-arms", "PRED")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*preds.json, key 'demo__calc-2': its prediction names instance 'demo__calc-9'*"])
    assert not (suite.path / "arena-out" / "ledger.jsonl").exists()
