"""Instance files: loaders, line numbers, validation messages."""

from __future__ import annotations

import json

import pytest

from pytest_swe_arena.instances.loading import InstanceFileError, build_instance, load_instances, read_rows

ROW = {"instance_id": "o__r-1", "repo": "o/r", "base_commit": "abc1234", "problem_statement": "p",
       "source": {"git": "https://example.com/o/r.git"}, "verify": "true"}


def test_json_array_rows_carry_the_line_they_start_on(tmp_path):
    path = tmp_path / "rows.json"
    path.write_text("[\n  " + json.dumps(ROW) + ",\n\n  " + json.dumps({**ROW, "instance_id": "o__r-2"}) + "\n]\n")
    assert [line for line, _ in read_rows(path)] == [2, 4]


def test_json_array_syntax_error_names_the_line(tmp_path):
    path = tmp_path / "rows.json"
    path.write_text("[\n" + json.dumps(ROW) + ",\n{\"instance_id\": }\n]")
    with pytest.raises(InstanceFileError, match=r"rows.json:3: not valid JSON"):
        list(read_rows(path))


def test_swe_bench_rows_load_as_exported(tmp_path):
    row = {**ROW, "FAIL_TO_PASS": json.dumps(["tests/a.py::test_x[1 2]"]), "PASS_TO_PASS": "[]",
           "version": "3.0", "environment_setup_commit": "abc", "hints_text": "", "created_at": "2020"}
    del row["verify"]
    instance = build_instance(tmp_path / "x.jsonl", 1, row, None)
    assert instance.fail_to_pass == ("tests/a.py::test_x[1 2]",) and instance.pass_to_pass == ()
    assert instance.row["version"] == "3.0"


def test_content_hash_changes_with_any_field(tmp_path):
    first = build_instance(tmp_path / "x.jsonl", 1, ROW, None)
    second = build_instance(tmp_path / "x.jsonl", 1, {**ROW, "hints_text": "new"}, None)
    assert first.content_sha256 != second.content_sha256


@pytest.mark.parametrize("bad_id", ["../x", "a/b", ".hidden", "a..b", ""])
def test_unsafe_ids_are_rejected(tmp_path, bad_id):
    with pytest.raises(InstanceFileError, match="field 'instance_id'"):
        build_instance(tmp_path / "x.jsonl", 7, {**ROW, "instance_id": bad_id}, None)


def test_rows_are_sorted_and_duplicates_rejected(tmp_path):
    rows = [(1, {**ROW, "instance_id": "b"}), (2, {**ROW, "instance_id": "a"})]
    assert [i.instance_id for i in load_instances(tmp_path / "x.jsonl", rows, None)] == ["a", "b"]
    duplicate = r"x.jsonl:3: field 'instance_id': duplicate 'a' \(first defined on line 2\)"
    with pytest.raises(InstanceFileError, match=duplicate):
        load_instances(tmp_path / "x.jsonl", [*rows, (3, {**ROW, "instance_id": "a"})], None)


@pytest.mark.parametrize(("extra", "message"), [
    ({"FAIL_TO_PASS": "[]"}, r"x.jsonl:4: field 'FAIL_TO_PASS': is empty and the row has no 'verify': any patch "
                             r"would resolve"),
    ({"FAIL_TO_PASS": []}, r"x.jsonl:4: field 'FAIL_TO_PASS': is empty"),
    ({"FAIL_TO_PASS": '["test_immutable"]'}, r"x.jsonl:4: field 'FAIL_TO_PASS': 'test_immutable' is not a pytest "
                                             r"node id .*give a 'verify' command, or a 'test_cmd'"),
    ({"FAIL_TO_PASS": '["t.py::test_a"]', "PASS_TO_PASS": '["test_x (mod.Class)"]'},
     r"x.jsonl:4: field 'PASS_TO_PASS': 'test_x \(mod.Class\)' is not a pytest node id"),
])
def test_per_test_rows_that_could_never_grade_are_rejected(tmp_path, extra, message):
    row = {key: value for key, value in ROW.items() if key != "verify"}
    with pytest.raises(InstanceFileError, match=message):
        build_instance(tmp_path / "x.jsonl", 4, {**row, **extra}, None)


def test_ids_without_a_file_load_with_a_verify_command_or_a_test_cmd(tmp_path):
    row = {**ROW, "FAIL_TO_PASS": '["test_immutable"]'}
    assert build_instance(tmp_path / "x.jsonl", 1, row, None).fail_to_pass == ("test_immutable",)
    del row["verify"]
    row["test_cmd"] = "bin/test {tests}"
    assert build_instance(tmp_path / "x.jsonl", 1, row, None).fail_to_pass == ("test_immutable",)
    # With a verify command an empty FAIL_TO_PASS is only carried along.
    assert build_instance(tmp_path / "x.jsonl", 1, {**ROW, "FAIL_TO_PASS": "[]"}, None).fail_to_pass == ()
