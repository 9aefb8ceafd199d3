"""SWE-bench's apply chain, run as its harness runs it: the oracle the replay arm's chain is checked against.

``GIT_APPLY_CMDS`` of ``swebench/harness/run_evaluation.py``, in its order, on the testbed (the
patch file appended), a clean tree between attempts, then ``git apply --check --reverse`` (the
patch is already in the tree). Nothing of ``pytest_swe_arena`` is used here.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

#: SWE-bench's chain, spelled as in its harness (the patch file is appended).
SWEBENCH_CHAIN = (
    ("git apply", "git apply --verbose"),
    ("3way", "git apply --verbose --3way"),
    ("reject", "git apply --verbose --reject"),
    ("fuzz", "patch --batch --forward --fuzz=5 -p1 -i"),
)


def swebench_apply(tree: Path, patch_file: Path) -> str | None:
    """The method SWE-bench's harness applies ``patch_file`` with in ``tree`` (None: none does).

    The tree is left as that method left it (at its commit, clean, when none applies).
    """
    for attempt, (method, command) in enumerate(SWEBENCH_CHAIN):
        if attempt:
            clean(tree)
        tried = subprocess.run(f"{command} {patch_file}", shell=True, cwd=tree, capture_output=True, check=False)
        if tried.returncode == 0:
            return method
    clean(tree)
    reverse = subprocess.run(["git", "apply", "--check", "--reverse", str(patch_file)], cwd=tree,
                             capture_output=True, check=False)
    return "already applied" if reverse.returncode == 0 else None


def clean(tree: Path) -> None:
    subprocess.run("git checkout -- . ; git clean -fdq", shell=True, cwd=tree, capture_output=True, check=False)


def drift_first_context_line(patch: str) -> str:
    """The patch with its first hunk's first context line changed, as a model's hand-written diff gets it."""
    head, hunk_header, body = patch.partition("\n@@")
    header_line, _, lines = body.partition("\n")
    context, _, rest = lines.partition("\n")
    assert context.startswith(" "), patch
    return f"{head}{hunk_header}{header_line}\n # a line the tree does not have\n{rest}"
