"""SWE-bench's runners and log parsers: ours agree with swebench 5.0.2 on every test id and verdict of a
corpus of real runner logs (tests/data/runner_logs, its answers recorded by swebench_reference.py), and
each grading option changes exactly what it says."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_swe_arena.grading.parsers import (
    LOG_PARSERS,
    TestResult,
    UnknownLogParser,
    log_parser,
    parse_log_django,
    parse_log_pytest,
    parse_log_pytest_v2,
    parse_log_sympy,
    read_results,
)
from pytest_swe_arena.grading.rules import (
    FAIL_TO_PASS,
    PASS_TO_PASS,
    PORTABLE,
    RULE_SETS,
    STRICT,
    SWEBENCH,
    GradingRules,
    as_named_in,
    recorded_status,
    reported_statuses,
    verdict_on_run,
)
from pytest_swe_arena.grading.runners import (
    Runner,
    RunnerChoiceError,
    eval_script_command,
    runner_for_row,
    runner_table,
    swebench_runner,
    targets_from_patch,
)

CORPUS = Path(__file__).resolve().parents[1] / "data" / "runner_logs"
LITE = Path(__file__).resolve().parents[3] / "shared" / "data" / "swe-bench-lite-test.json"
#: SWE-bench's status words for ours (it has no word for an XPASS: it never reads one).
SWEBENCH_WORDS = {"passed": "PASSED", "failed": "FAILED", "error": "ERROR", "skipped": "SKIPPED", "xfailed": "XFAIL"}


def corpus() -> list[dict[str, Any]]:
    entries = []
    for path in sorted(CORPUS.glob("*.json")):
        meta = json.loads(path.read_text(encoding="utf-8"))
        meta["text"] = (CORPUS / meta["log"]).read_text(encoding="utf-8")
        meta["name"] = path.stem
        entries.append(meta)
    return entries


ENTRIES = corpus()
PARSES = [(entry, parser) for entry in ENTRIES for parser in entry["log_parsers"]]
CASES = [(entry, case) for entry in ENTRIES for case in entry["cases"]]


def case_id(entry: dict[str, Any], case: dict[str, Any]) -> str:
    return f"{entry['name']}: {case['name']}"


def verdict(entry: dict[str, Any], case: dict[str, Any], rules: GradingRules = SWEBENCH) -> Any:
    results = read_results(case["log_parser"], entry["text"])
    # The grading tree's path where the log names it; the other logs name none (graded as in SWE-bench's images).
    tree = entry.get("tree", "/testbed")
    return verdict_on_run(results, case["FAIL_TO_PASS"], case["PASS_TO_PASS"], entry["returncode"], rules, tree)


def test_the_corpus_has_every_runner_and_each_result_swebench_reads():
    parsers = {parser for entry in ENTRIES for parser in entry["log_parsers"]}
    assert {"parse_log_django", "parse_log_sympy", "parse_log_sphinx", "parse_log_pytest", "parse_log_pytest_v2",
            "parse_log_pytest_options", "parse_log_matplotlib", "parse_log_seaborn"} <= parsers
    words = {word for entry in ENTRIES for statuses in entry["swebench"]["statuses"].values()
             for word in statuses.values()}
    assert set(SWEBENCH_WORDS.values()) <= words
    verdicts = [entry["swebench"]["verdicts"][case["name"]]["resolved"] for entry, case in CASES]
    assert True in verdicts and False in verdicts
    assert {entry["swebench"]["version"] for entry in ENTRIES} == {"5.0.2"}


@pytest.mark.parametrize(("entry", "parser"), PARSES, ids=[f"{e['name']}-{p}" for e, p in PARSES])
def test_statuses_agree_with_swebench_on_every_id(entry, parser):
    ours = {test_id: SWEBENCH_WORDS[status]
            for test_id, status in reported_statuses(read_results(parser, entry["text"])).items()}
    theirs = entry["swebench"]["statuses"][parser]
    # The one documented difference: a status word that begins a longer token (pytest's "ERROR: file not
    # found", Django's "ERROR: test_x ...") names no test here; SWE-bench keeps the token as a status.
    assert {test_id for test_id, word in theirs.items() if word not in SWEBENCH_WORDS.values()} \
        == set(theirs) - set(ours)
    believed = {test_id: word for test_id, word in theirs.items() if word in SWEBENCH_WORDS.values()}
    assert list(ours.items()) == list(believed.items())  # the same ids, statuses, and order


@pytest.mark.parametrize(("entry", "case"), CASES, ids=[case_id(e, c) for e, c in CASES])
def test_verdicts_agree_with_swebench(entry, case):
    ours = verdict(entry, case)
    theirs = entry["swebench"]["verdicts"][case["name"]]
    assert ours.resolved is theirs["resolved"]
    assert (ours.rejected is None) is theirs["log_believed"]
    if theirs["log_believed"]:
        for kind, tests in ((FAIL_TO_PASS, ours.fail_to_pass), (PASS_TO_PASS, ours.pass_to_pass)):
            assert sorted(theirs[kind]["success"]) == sorted(t for t, s in tests.items() if SWEBENCH.passes(s, kind))
            assert sorted(theirs[kind]["failure"]) == sorted(t for t, s in tests.items()
                                                             if not SWEBENCH.passes(s, kind))


def flips(rules: GradingRules) -> dict[str, bool]:
    """The corpus cases whose verdict ``rules`` changes from SWE-bench's, to the new verdict."""
    changed = {}
    for entry, case in CASES:
        before, after = verdict(entry, case).resolved, verdict(entry, case, rules).resolved
        if before != after:
            changed[case_id(entry, case)] = after
    return changed


def changed_tests(rules: GradingRules) -> set[tuple[str, str, str]]:
    """Every (case, test, status under rules) whose pass or fail ``rules`` changes from SWE-bench's."""
    changed = set()
    for entry, case in CASES:
        before, after = verdict(entry, case), verdict(entry, case, rules)
        for kind, old, new in ((FAIL_TO_PASS, before.fail_to_pass, after.fail_to_pass),
                               (PASS_TO_PASS, before.pass_to_pass, after.pass_to_pass)):
            for test_id in old:
                if SWEBENCH.passes(old[test_id], kind) != rules.passes(new[test_id], kind):
                    changed.add((case_id(entry, case), test_id, new[test_id]))
    return changed


def test_read_every_result_counts_what_swebench_drops():
    rules = GradingRules("every", read_every_result=True)
    assert flips(rules) == {
        "django-runner: expected failure": True,
        "pytest-classic-vv: skipped PASS_TO_PASS, v2": True,
        "pytest-rA: xfail with its reason, v2": True,
        "pytest-rA: xfail, seaborn": True,
        "sympy-statuses: xfail": True,
        "sympy-statuses: skipped PASS_TO_PASS": True,
        "sympy-statuses: last test of a file": True,
        "sympy-statuses: printed before its result": True,
    }
    # Only tests SWE-bench left missing change, and they now have the status their line states.
    for case, test_id, status in changed_tests(rules):
        entry, spec = next((e, c) for e, c in CASES if case_id(e, c) == case)
        assert recorded_status(test_id, reported_statuses(read_results(spec["log_parser"], entry["text"]))) == "missing"
        assert status != "missing"


def test_skipped_pass_to_pass_fails_when_asked():
    rules = GradingRules("no-skips", skipped_pass_to_pass_passes=False)
    assert flips(rules) == {"django-runner: passing, with skipped PASS_TO_PASS": False}
    assert {(test, status) for _, test, status in changed_tests(rules)} == {
        ("test_skipped (shop.tests.ItemTests.test_skipped)", "skipped"),
        ("test_skip_unless (shop.tests.ItemTests.test_skip_unless)", "skipped")}
    # With every result read, sympy's skips are seen, and then fail too.
    every = GradingRules("every", read_every_result=True)
    strict_skips = dataclasses.replace(every, name="every-no-skips", skipped_pass_to_pass_passes=False)
    entry, case = next((e, c) for e, c in CASES if case_id(e, c) == "sympy-statuses: skipped PASS_TO_PASS")
    assert verdict(entry, case, every).resolved and not verdict(entry, case, strict_skips).resolved


def test_xpassed_passes_when_asked():
    every = GradingRules("every", read_every_result=True)
    xpass = GradingRules("xpass", read_every_result=True, xpassed_passes=True)
    changed = {case: resolved for case, resolved in flips(xpass).items() if case not in flips(every)}
    assert changed == {"django-runner: unexpected success": True, "pytest-rA: xpass": True,
                       "sympy-statuses: xpass": True}
    assert {status for _, _, status in changed_tests(xpass) - changed_tests(every)} == {"xpassed"}
    # A strict XPASS is a failure in pytest's own summary, whatever the option.
    entry, case = next((e, c) for e, c in CASES if case_id(e, c) == "pytest-rA: strict xpass")
    assert not verdict(entry, case, xpass).resolved
    with pytest.raises(ValueError, match="xpassed_passes needs read_every_result"):
        GradingRules("bad", xpassed_passes=True)


def test_the_worst_of_duplicated_ids_stands_when_asked():
    rules = GradingRules("worst", duplicates="worst")
    assert flips(rules) == {"django-runner: same docstring, failed then passed": False}
    assert changed_tests(rules) == {("django-runner: same docstring, failed then passed", "Regression test for #1.",
                                     "failed")}
    # An id cut inside its brackets: SWE-bench wants its matches to agree (a mix is missing), worst takes the worst.
    statuses = {"t.py::test_p[a c]": "skipped", "t.py::test_p[a d]": "failed"}
    # skipped and failed agree (neither passes): the first
    assert recorded_status("t.py::test_p[a", statuses) == "skipped"
    assert recorded_status("t.py::test_p[a", statuses, rules) == "failed"
    mixed = {"t.py::test_p[a b]": "passed", **statuses}
    assert recorded_status("t.py::test_p[a", mixed) == "missing"
    assert recorded_status("t.py::test_p[a", mixed, rules) == "failed"


def test_require_exit_zero_when_asked():
    rules = GradingRules("exit-zero", require_exit_zero=True)
    changed = flips(rules)
    assert changed and set(changed.values()) == {False}
    returncodes = {entry["name"]: entry["returncode"] for entry in ENTRIES}
    assert all(returncodes[case.split(":")[0]] != 0 for case in changed)
    assert changed_tests(rules) == set()  # no test's status changes: the run is not believed
    # SWE-bench's rule alone: a non-zero exit with no failing test in the log is not believed.
    entry, case = next((e, c) for e, c in CASES if case_id(e, c) == "pytest-exit-status: exit status without a failure")
    assert verdict(entry, case).rejected == "the runner exited 1 but its log shows no failing test"


def test_named_rule_sets():
    assert RULE_SETS == {"swebench": SWEBENCH, "strict": STRICT, "portable": PORTABLE}
    assert PORTABLE == GradingRules("portable", tree_paths=True)  # SWE-bench's rules but this one
    assert not STRICT.tree_paths
    assert SWEBENCH == GradingRules()
    # strict is every option turned the other way but xpassed_passes (a non-strict XPASS stays a failure).
    assert (STRICT.read_every_result, STRICT.skipped_pass_to_pass_passes, STRICT.xpassed_passes, STRICT.duplicates,
            STRICT.require_exit_zero) == (True, False, False, "worst", True)
    assert not verdict(*next((e, c) for e, c in CASES if case_id(e, c) == "sympy-statuses: passing"), STRICT).resolved
    with pytest.raises(ValueError, match="duplicates must be 'last' or 'worst'"):
        GradingRules("bad", duplicates="first")  # type: ignore[arg-type]


#: pylint-7080's PASS_TO_PASS id that names the tree SWE-bench recorded the row in, on its 2023 build machine.
BUILDER_ID = ("tests/test_self.py::TestRunTC::test_stdin[/n/fs/p-swe-bench/temp/pylint/tmpr6zb6auz/"
              "pylint-dev__pylint__2.15/tests/mymodule.py-mymodule-/n/fs/p-swe-bench/temp/pylint/tmpr6zb6auz/"
              "pylint-dev__pylint__2.15/tests/mymodule.py]")


def pylint_7080() -> tuple[dict[str, Any], dict[str, Any]]:
    return next((e, c) for e, c in CASES if case_id(e, c) == "pylint-7080-gold: pylint-dev__pylint-7080")


def test_an_id_naming_swebenchs_tree_is_missing_under_swebenchs_rules():
    entry, case = pylint_7080()
    assert BUILDER_ID in case["PASS_TO_PASS"]
    # The same test passed, under the grading tree's path (which parse_log_pylint cuts to its last part).
    printed = BUILDER_ID.replace("/n/fs/p-swe-bench/temp/pylint/tmpr6zb6auz/pylint-dev__pylint__2.15", entry["tree"])
    assert f"PASSED {printed}" in entry["text"].splitlines()
    assert verdict(entry, case).failing(SWEBENCH) == [f"{BUILDER_ID} (missing)"]
    assert entry["swebench"]["verdicts"][case["name"]]["PASS_TO_PASS"]["failure"] == [BUILDER_ID]


def test_portable_rules_match_it_to_the_same_path_in_the_grading_tree():
    assert flips(PORTABLE) == {"pylint-7080-gold: pylint-dev__pylint-7080": True}
    assert changed_tests(PORTABLE) == {("pylint-7080-gold: pylint-dev__pylint-7080", BUILDER_ID, "passed")}
    # Only the tree the tests ran in: graded as if they had run elsewhere, the id is missing again.
    entry, case = pylint_7080()
    results = read_results(case["log_parser"], entry["text"])
    elsewhere = verdict_on_run(results, case["FAIL_TO_PASS"], case["PASS_TO_PASS"], 0, PORTABLE, "/tmp/another/tree")
    assert elsewhere.failing(PORTABLE) == [f"{BUILDER_ID} (missing)"]
    with pytest.raises(ValueError, match="'portable': tree_paths needs the path of the tree the tests ran in"):
        verdict_on_run(results, case["FAIL_TO_PASS"], case["PASS_TO_PASS"], 0, PORTABLE)


def test_portable_rules_match_the_same_relative_path_exactly():
    tree = "/work/grading/tree"
    log = "\n".join([f"PASSED tests/t.py::test_read[{tree}/tests/data/a.txt]",
                     f"PASSED tests/t.py::test_cut[{tree}/tests/data/a.txt]",  # cut by parse_log_pylint
                     f"FAILED tests/t.py::test_read[{tree}/tests/data/b.txt] - assert 0"])
    builder = "/n/fs/p-swe-bench/temp/shapes/tmpab12cd/acme__shapes__1.0"

    def status(recorded: str, parser: str = "parse_log_pytest") -> str:
        return verdict_on_run(read_results(parser, log), [], [recorded], 0, PORTABLE, tree).pass_to_pass[recorded]

    for root in (builder, "/testbed"):
        assert status(f"tests/t.py::test_read[{root}/tests/data/a.txt]") == "passed"
        assert status(f"tests/t.py::test_read[{root}/tests/data/b.txt]") == "failed"
        assert status(f"tests/t.py::test_cut[{root}/tests/data/a.txt]", "parse_log_pylint") == "passed"
        # Another relative path, a prefix of it, a path below it: exact after the root is replaced, no other match.
        for other in ("tests/data/c.txt", "tests/data/a.tx", "tests/data/a.txt/x", "data/a.txt"):
            assert status(f"tests/t.py::test_read[{root}/{other}]") == "missing"
            assert status(f"tests/t.py::test_cut[{root}/{other}]", "parse_log_pylint") == "missing"
    # Only a path that starts with SWE-bench's tree is moved; its parts are names, not paths.
    assert as_named_in("t.py::test[/x/testbed/a.txt]", tree) == "t.py::test[/x/testbed/a.txt]"
    assert as_named_in(f"t.py::test[{builder}/a-{builder}/b]", tree) == f"t.py::test[{tree}/a-{tree}/b]"
    assert as_named_in("t.py::test[/n/fs/p-swe-bench/temp/shapes/tmpab12cd/a.txt]", tree) \
        == "t.py::test[/n/fs/p-swe-bench/temp/shapes/tmpab12cd/a.txt]"
    # SWE-bench's own rules leave every such id missing.
    recorded = "tests/t.py::test_read[/testbed/tests/data/a.txt]"
    assert verdict_on_run(read_results("parse_log_pytest", log), [], [recorded],
                          0, SWEBENCH, tree).pass_to_pass == {recorded: "missing"}


def test_a_log_that_names_no_test_never_resolves():
    assert verdict_on_run([], [], [], 0).rejected == "the log names no test"
    assert not verdict_on_run([], [], [], 0).resolved


# --- parsers on small inputs: what the corpus shows, line by line -----------------------------

def test_pytest_ids_are_cut_at_their_first_space_and_failed_lines_lose_their_dashes():
    text = "PASSED t.py::test_p[a b]\nFAILED t.py::test_q[x - y] - AssertionError\nXPASS t.py::test_r - why\n"
    assert parse_log_pytest(text) == [TestResult("t.py::test_p[a", "passed"), TestResult("t.py::test_q[x", "failed"),
                                      TestResult("t.py::test_r", "xpassed", swebench_reads=False)]


def test_quirks_kept_as_swebench_has_them():
    # Expected values are what swebench 5.0.2's parsers give these lines.
    assert parse_log_pytest("FAILED - t.py::x\n") == [TestResult("t.py::x", "failed")]
    colours = "\x1b[1;31mFAILED\x1b[0m t.py::x - boom\n\x1b[32mPASSED\x1b[0m t.py::y\n"
    assert [r for r in parse_log_pytest_v2(colours) if r.swebench_reads] == [TestResult("t.py::y", "passed")]
    warning = "test_a ok\nsympy/x.py:3: DeprecationWarning: see sympy/y.py:4 and sympy/z.py:5 here\n"
    assert parse_log_sympy(warning) == [TestResult("DeprecationWarning: see sympy/y.py:4 and sympy/z.py:5", "failed"),
                                        TestResult("test_a", "passed")]


def test_django_reads_docstring_lines_and_statuses_after_printed_output():
    text = ("test_a (m.C.test_a)\nIts docstring. ... ok\n"
            "test_b (m.C.test_b) ... printed\nFAIL\n"
            "test_c (m.C.test_c) ... printed\nok\n"
            "test_d (m.C.test_d) ... expected failure\n")
    assert parse_log_django(text) == [
        TestResult("Its docstring.", "passed"),
        TestResult("test_b (m.C.test_b)", "failed", swebench_reads=False),
        TestResult("test_c (m.C.test_c)", "passed"),
        TestResult("test_d (m.C.test_d)", "xfailed", swebench_reads=False)]


def test_sympy_reads_banners_as_failures_and_the_last_test_of_a_file():
    text = ("sympy/a/tests/test_x.py[2] \ntest_one ok\ntest_two E                         [FAIL]\n\n"
            "______ sympy/a/tests/test_x.py:test_two ______\n")
    assert parse_log_sympy(text) == [TestResult("sympy/a/tests/test_x.py:test_two", "failed"),
                                     TestResult("test_one", "passed"),
                                     TestResult("test_two", "error", swebench_reads=False)]


def test_eval_script_logs_are_read_between_their_markers_unless_nothing_is_there():
    inside = "+ : '>>>>> Start Test Output'\nPASSED t.py::a\n+ : '>>>>> End Test Output'\n"
    assert read_results("parse_log_pytest", "PASSED t.py::b\n" + inside) == [TestResult("t.py::a", "passed")]
    empty = "+ : '>>>>> Start Test Output'\n+ : '>>>>> End Test Output'\nPASSED t.py::c\n"
    assert read_results("parse_log_pytest", empty) == [TestResult("t.py::c", "passed")]


def test_an_unknown_parser_is_named_with_those_there_are():
    with pytest.raises(UnknownLogParser, match=r"unknown log parser 'parse_log_nose'; known: .*parse_log_django"):
        log_parser("parse_log_nose")


# --- runners --------------------------------------------------------------------------------

def test_every_repository_of_swebench_lite_has_its_runner():
    if not LITE.is_file():
        pytest.skip(f"{LITE} is not on this machine")
    rows = json.loads(LITE.read_text(encoding="utf-8"))
    for row in rows:
        runner = swebench_runner(row["repo"], row["version"])
        assert runner is not None, row["repo"]
        assert runner.log_parser in LOG_PARSERS
        assert runner.command(row["test_patch"]).startswith(runner.test_cmd + " ")
    assert set(runner_table()) >= {row["repo"] for row in rows}


def test_every_runner_in_the_table_is_whole():
    for repo in runner_table():
        runner = swebench_runner(repo)
        assert runner is not None and runner.test_cmd and runner.log_parser in LOG_PARSERS, repo
        assert runner.targets in ("files", "django_modules"), repo
    assert len(runner_table()) == 18  # every Python repository of SWE-bench's parser table


def test_runners_by_repository_and_version():
    assert swebench_runner("django/django", "3.0") == Runner(
        "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1", "parse_log_django", "django_modules")
    assert swebench_runner("django/django", "1.9").test_cmd == "./tests/runtests.py --verbosity 2"  # type: ignore[union-attr]
    assert swebench_runner("astropy/astropy", "1.3").test_cmd.endswith("console_output_style=classic --tb=no")  # type: ignore[union-attr]
    assert swebench_runner("astropy/astropy", "5.0").test_cmd == "pytest -rA"  # type: ignore[union-attr]
    assert swebench_runner("sphinx-doc/sphinx", "7.1") == Runner("tox --current-env -epy39 -v --", "parse_log_sphinx")
    # sympy's bin/test with fixed seeds: its random seed orders the assumptions' prerequisites (sympy-11897).
    assert swebench_runner("sympy/sympy", "1.0").test_cmd == (  # type: ignore[union-attr]
        "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' PYTHONHASHSEED=0 bin/test -C --verbose --seed 0")
    assert swebench_runner("someone/else", "1.0") is None


TEST_PATCH = """\
diff --git a/tests/migrations/test_writer.py b/tests/migrations/test_writer.py
--- a/tests/migrations/test_writer.py
+++ b/tests/migrations/test_writer.py
diff --git a/tests/migrations/data/expected.json b/tests/migrations/data/expected.json
diff --git a/tests/admin_views/admin.py b/tests/admin_views/admin.py
diff --git a/docs/notes.txt b/docs/notes.txt
"""


def test_targets_are_the_files_test_patch_touches_but_data_and_djangos_are_modules():
    assert targets_from_patch(TEST_PATCH) == ["tests/migrations/test_writer.py", "tests/admin_views/admin.py"]
    assert targets_from_patch(TEST_PATCH, "django_modules") == ["migrations.test_writer", "admin_views.admin"]
    django = swebench_runner("django/django", "4.0")
    assert django is not None and django.command(TEST_PATCH) == (
        "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 "
        "migrations.test_writer admin_views.admin")


EVAL_SCRIPT = """\
#!/bin/bash
set -uxo pipefail
source /opt/miniconda3/bin/activate
conda activate testbed
cd /testbed
export LANG=en_US.UTF-8
git checkout abc123 tests/test_x.py
git apply -v - <<'EOF_114329324912'
EOF_114329324912
: '>>>>> Start Test Output'
./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 x.tests
: '>>>>> End Test Output'
git checkout abc123 tests/test_x.py
"""


def test_an_eval_scripts_test_command_is_the_part_between_its_markers():
    assert eval_script_command(EVAL_SCRIPT) == (
        "export LANG=en_US.UTF-8\n./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 x.tests")
    with pytest.raises(RunnerChoiceError, match="has no test command between") as raised:
        eval_script_command("#!/bin/bash\npytest\n")
    assert raised.value.field == "eval_script"


def test_a_rows_fields_override_the_table():
    django = {"repo": "django/django", "version": "4.0"}
    assert runner_for_row(django) == swebench_runner("django/django", "4.0")
    assert runner_for_row({**django, "test_cmd": "python tests/runtests.py"}) == Runner(
        "python tests/runtests.py", "parse_log_django", "django_modules")
    assert runner_for_row({**django, "log_parser": "parse_log_pytest"}).log_parser == "parse_log_pytest"  # type: ignore[union-attr]
    from_script = runner_for_row({**django, "eval_script": EVAL_SCRIPT})
    assert from_script is not None and from_script.targets == "in_command"
    assert from_script.command("diff --git a/x.py b/x.py") == eval_script_command(EVAL_SCRIPT)
    assert runner_for_row({"repo": "someone/else"}) is None
    assert runner_for_row({"repo": "someone/else", "test_cmd": "pytest -rA"}) is None  # the harness's pytest reading
    assert runner_for_row({"repo": "someone/else", "test_cmd": "make check", "log_parser": "parse_log_sympy"}) == \
        Runner("make check", "parse_log_sympy")
    for row, field, message in (
            ({**django, "log_parser": "parse_log_nose"}, "log_parser", "names no parser; expected one of"),
            ({"repo": "someone/else", "log_parser": "parse_log_pytest"}, "log_parser", "give the 'test_cmd'"),
            ({"repo": "someone/else", "eval_script": EVAL_SCRIPT}, "log_parser", "is needed with an 'eval_script'"),
            ({**django, "eval_script": "pytest"}, "eval_script", "has no test command")):
        with pytest.raises(RunnerChoiceError, match=message) as raised:
            runner_for_row(row)
        assert raised.value.field == field
