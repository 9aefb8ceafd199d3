"""Helpers of the test suite, one package: real git projects, real agent CLIs, scripted model
endpoints, real sshd hosts, a browser, fault injection. No test imports another test."""

from __future__ import annotations

from pathlib import Path

#: tests/, the repository, and the test data folder.
TESTS = Path(__file__).resolve().parent.parent
REPO_ROOT = TESTS.parent
DATA = TESTS / "data"
