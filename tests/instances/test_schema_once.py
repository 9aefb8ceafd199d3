"""Instance files validated once per content (``SchemaMemo``): skipped only for the very bytes that passed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from helpers.arena import XDIST

from pytest_swe_arena.instances.loading import SchemaMemo, load_instances, read_rows
from pytest_swe_arena.instances.model import InstanceFileError

ROW = {"instance_id": "demo__calc-1", "repo": "demo/calc", "base_commit": "a" * 40, "problem_statement": "fix it",
       "source": {"git": "https://example.com/calc.git"}, "verify": "true"}


def write(path: Path, *rows: dict[str, object]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_only_files_whose_every_row_passes_the_schema_are_remembered(tmp_path: Path) -> None:
    memo = SchemaMemo(tmp_path / "cache")
    good = write(tmp_path / "good.jsonl", ROW)
    bad = write(tmp_path / "bad.jsonl", ROW, {**ROW, "instance_id": "../escape"})
    torn = tmp_path / "torn.jsonl"
    torn.write_text('{"instance_id": \n')
    for path in (good, bad, torn, tmp_path / "missing.jsonl"):
        memo.check(path)
    assert [marker.name for marker in memo.folder.iterdir()] == [file_digest(good)]


def test_a_row_known_to_pass_still_gets_the_checks_beyond_the_schema(tmp_path: Path) -> None:
    path = write(tmp_path / "dup.jsonl", ROW, ROW)
    with pytest.raises(InstanceFileError, match="duplicate"):
        load_instances(path, list(read_rows(path)), None, schema_checked=True)


@pytest.mark.parametrize("xdist", XDIST)
def test_a_file_edited_after_the_controller_checked_it_is_validated_by_the_worker(suite, calc, xdist):
    # Each process that collects rewrites the instance file as it starts, after the controller took
    # its digest: a worker must not trust the digest for other bytes, and the bad row is a
    # collection error naming the file and line.
    instances = suite.instances([calc.row("demo__calc-1")])
    write(suite.path / "bad.jsonl", {**calc.row("demo__calc-1"), "instance_id": "../escape"})
    (suite.path / "conftest.py").write_text(
        "import shutil\n"
        "def pytest_configure(config):\n"
        "    if hasattr(config, 'workerinput') or not config.getoption('numprocesses', None):\n"
        f"        shutil.copy({str(suite.path / 'bad.jsonl')!r}, {str(instances)!r})\n"
    )
    result = suite.run("--arena-arms=GOLD", *xdist)
    result.stdout.fnmatch_lines(["*invalid instance file*demo.jsonl*1*instance_id*"])
    assert not (suite.path / "arena-out/ledger.jsonl").exists()


def test_the_controller_checks_the_files_before_its_workers_start_and_they_collect_without_the_schema(suite, calc):
    # A worker fails any row it is asked to validate: the sweep collects and runs only because the
    # controller checked the file before the workers started, and they find its bytes known.
    instances = suite.instances([calc.row("demo__calc-1")])
    (suite.path / "conftest.py").write_text(
        "def pytest_configure(config):\n"
        "    if hasattr(config, 'workerinput'):\n"
        "        from pytest_swe_arena.instances import loading\n"
        "        def validated(path, line, row):\n"
        "            raise AssertionError(f'{path}:{line} validated again on a worker')\n"
        "        loading._schema_error = validated\n"
    )
    result = suite.run("--arena-arms=GOLD", "-n", "2")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert [row["status"] for row in suite.ledger()] == ["resolved"]
    assert [marker.name for marker in suite.cache.glob("schema-checked/*/*")] == [file_digest(instances)]


def test_a_file_whose_bytes_passed_once_is_not_validated_again_until_they_change(tmp_path: Path, monkeypatch) -> None:
    from pytest_swe_arena.instances import loading

    memo = loading.SchemaMemo(tmp_path / "cache")
    good = write(tmp_path / "good.jsonl", ROW)
    memo.check(good)
    assert memo.known(file_digest(good))

    def no_schema(path: Path, line: int, row: object) -> None:
        raise AssertionError(f"{path}:{line} validated again")

    monkeypatch.setattr(loading, "_schema_error", no_schema)
    memo.check(good)
    # Other bytes (one row changed) are not known: they are validated, and a bad row still fails.
    monkeypatch.undo()
    write(good, {**ROW, "instance_id": "../escape"})
    assert not memo.known(file_digest(good))
    memo.check(good)
    assert not memo.known(file_digest(good))


def test_a_file_checked_under_another_schema_is_validated_again(tmp_path: Path, monkeypatch) -> None:
    from pytest_swe_arena.instances import loading

    good = write(tmp_path / "good.jsonl", ROW)
    loading.SchemaMemo(tmp_path / "cache").remember(file_digest(good))
    monkeypatch.setattr(loading, "_schema_key", lambda: "another-schema")
    assert not loading.SchemaMemo(tmp_path / "cache").known(file_digest(good))


def test_one_process_collects_a_checked_file_without_the_schema_and_still_rejects_a_bad_one(suite, calc) -> None:
    instances = suite.instances([calc.row("demo__calc-1")])
    first = suite.run("--collect-only", "-p", "no:xdist")
    first.stdout.fnmatch_lines(["*collected*"])
    markers = list(suite.cache.glob("schema-checked/*/*"))
    assert [marker.name for marker in markers] == [file_digest(instances)], markers
    write(instances, {**calc.row("demo__calc-1"), "instance_id": "../escape"})
    result = suite.run("--collect-only", "-p", "no:xdist")
    result.stdout.fnmatch_lines(["*invalid instance file*demo.jsonl*1*instance_id*"])
