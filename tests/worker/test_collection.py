"""Collection: node ids, selection, arms, and clean errors for bad instance files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.arena import XDIST
from helpers.gitrepos import bundle, read_ledger, write_jsonl


def test_node_ids_carry_instance_and_arm_and_every_instances_first_cell_comes_first(suite, calc):
    """Cells run round by round (trial, then arm, then instance): instances sorted by id within a round."""
    suite.instances([calc.row("demo__calc-2"), calc.row("demo__calc-1")])
    result = suite.run("--collect-only", "-q")
    result.stdout.fnmatch_lines([
        "instances/demo.jsonl::demo__calc-1[[]GOLD[]]",
        "instances/demo.jsonl::demo__calc-2[[]GOLD[]]",
        "instances/demo.jsonl::demo__calc-1[[]EMPTY[]]",
        "instances/demo.jsonl::demo__calc-2[[]EMPTY[]]",
        "4 tests collected*",
    ])


def test_with_repeats_and_several_files_each_round_visits_every_instance(suite, calc):
    suite.instances([calc.row("demo__calc-2"), calc.row("demo__calc-1")])
    suite.instances([calc.row("other__calc-9")], name="instances/other.jsonl")
    result = suite.run("--collect-only", "-q", "--arena-repeat=2")
    cells = [line for line in result.stdout.lines if "::" in line]
    rounds = [[f"{name}[{arm}-r{trial}]" for name in ("demo.jsonl::demo__calc-1", "demo.jsonl::demo__calc-2",
                                                     "other.jsonl::other__calc-9")]
              for trial in (1, 2) for arm in ("GOLD", "EMPTY")]
    assert cells == [f"instances/{cell}" for cells_of_round in rounds for cell in cells_of_round]


def test_keyword_file_and_repo_mark_selection(suite, calc):
    suite.instances([calc.row("demo__calc-1"), calc.row("demo__calc-2")])
    suite.instances([calc.row("other__calc-9", repo="other/widgets")], name="instances/other.jsonl")

    result = suite.run("--collect-only", "-q", "-k", "calc-1 and GOLD")
    result.stdout.fnmatch_lines(["instances/demo.jsonl::demo__calc-1[[]GOLD[]]", "1/6 tests collected*"])

    result = suite.run("--collect-only", "-q", "instances/other.jsonl")
    result.stdout.fnmatch_lines(["instances/other.jsonl::other__calc-9[[]GOLD[]]", "*2 tests collected*"])
    assert "demo.jsonl" not in result.stdout.str()

    result = suite.run("--collect-only", "-q", "-m", "widgets", "--strict-markers")
    result.stdout.fnmatch_lines(["*other__calc-9[[]GOLD[]]", "*other__calc-9[[]EMPTY[]]", "2/6 tests collected*"])


def test_json_array_files_collect_like_jsonl(suite, calc):
    (suite.path / "instances").mkdir()
    (suite.path / "instances/rows.json").write_text(json.dumps([calc.row("demo__calc-1")], indent=2))
    result = suite.run("--collect-only", "-q", "--arena-arms", "GOLD")
    result.stdout.fnmatch_lines(["instances/rows.json::demo__calc-1[[]GOLD[]]", "1 test collected*"])


def test_unknown_arm_is_a_usage_error_listing_known_arms(suite, calc):
    suite.instances([calc.row()])
    suite.arms_toml = '[tool.swe_arena.arms.SOLO]\nkind = "empty"\n'
    result = suite.run("--arena-arms", "GOLD,NOPE")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--arena-arms: unknown arm 'NOPE'; known arms: EMPTY, GOLD, SOLO*"])


def test_unknown_kind_and_bad_arm_settings_name_the_table(suite, calc):
    suite.instances([calc.row()])
    suite.arms_toml = '[tool.swe_arena.arms.X]\nkind = "telepathy"\n'
    result = suite.run("--arena-arms", "X")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*[[]tool.swe_arena.arms.X[]]: unknown kind 'telepathy'; known kinds: *empty*gold*"])

    suite.arms_toml = '[tool.swe_arena.arms.X]\nkind = "gold"\ncolour = "red"\n'
    result = suite.run("--arena-arms", "X")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*[[]tool.swe_arena.arms.X[]]: field 'colour': unknown setting for kind 'gold'*"])




def outside_value(calc, elsewhere, noun: str, exists: bool):
    """A value for ``--arena-<noun>`` outside the suite: a file or dir the option would accept."""
    path = elsewhere / {"instances": "lite.jsonl", "config": "arms.toml", "env-specs": "specs.toml"}.get(noun, noun)
    if exists and noun == "instances":
        write_jsonl(path, [calc.row()])
    elif exists and noun in ("config", "env-specs"):
        path.write_text("[tool.swe_arena]\n" if noun == "config" else "[specs]\n")
    elif exists:
        path.mkdir()
    return path


@pytest.mark.parametrize("noun,exists", [
    ("out", False), ("out", True), ("cache", False), ("instances", True), ("config", True), ("repos", True),
    ("env-specs", True),
])
@pytest.mark.parametrize("xdist", XDIST)
def test_a_path_outside_the_suite_given_with_a_space_is_one_usage_error(suite, calc, tmp_path_factory,
                                                                       xdist, noun, exists):
    # pytest chooses its rootdir before plugin options exist: an existing path given as
    # "--arena-out DIR" would make it skip the suite's pyproject without a word, and the out
    # dir exists from the first run on (before xdist's workers redo the choice, even).
    suite.instances([calc.row()])
    path = outside_value(calc, tmp_path_factory.mktemp("elsewhere"), noun, exists)
    result = suite.run("--arena-arms", "GOLD", f"--arena-{noun}", str(path), *xdist)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output
    assert [line for line in result.stderr.lines if line.strip()] == [
        f"ERROR: --arena-{noun} {path}: pytest reads '{path}' as a test path when it chooses its rootdir "
        f"(before plugins add their options), so once it exists the rootdir would be {path.parent.parent} "
        f"(no ini file) instead of {suite.path} ({suite.path / 'pyproject.toml'}); write --arena-{noun}={path}"
    ]
    assert not (suite.path / "arena-out").exists()


def test_values_given_apart_are_found_for_options_of_one_and_of_many_values():
    from pytest_swe_arena.settings import values_given_apart

    args = ["--arena-instances", "a.jsonl", "b.jsonl", "-n", "2", "--arena-out", "out", "--arena-resume", "tests",
            "--arena-arms=GOLD", "--arena-cache", "-x"]
    assert values_given_apart(args) == [
        ("--arena-instances", "a.jsonl"), ("--arena-instances", "b.jsonl"), ("--arena-out", "out")]


def test_a_value_in_pytest_addopts_is_checked_like_one_on_the_command_line(suite, calc, tmp_path_factory,
                                                                           monkeypatch):
    suite.instances([calc.row()])
    out = tmp_path_factory.mktemp("elsewhere") / "out"
    monkeypatch.setenv("PYTEST_ADDOPTS", f"--arena-out {out}")
    result = suite.run("--arena-arms", "GOLD", "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --arena-out {out} (in PYTEST_ADDOPTS): pytest reads *"])


@pytest.mark.parametrize("xdist", XDIST)
def test_values_inside_the_suite_or_written_with_equals_are_accepted(suite, calc, tmp_path_factory, xdist):
    suite.instances([calc.row()])
    out = tmp_path_factory.mktemp("elsewhere") / "out"
    assert suite.run("--arena-arms", "GOLD", f"--arena-out={out}", *xdist).ret == pytest.ExitCode.OK
    assert suite.run("--arena-arms", "GOLD", f"--arena-out={out}", "--arena-resume", *xdist).ret == pytest.ExitCode.OK
    assert len(read_ledger(out)) == 2
    assert suite.run("--arena-arms", "GOLD", "--arena-out", "inside", *xdist).ret == pytest.ExitCode.OK
    assert len(read_ledger(suite.path / "inside")) == 1


SCRATCH_PLUGIN = """
import json
import os


def pytest_addoption(parser):
    parser.addoption("--scratch-dir", help="a directory the controller creates as the session starts")


def pytest_configure(config):
    scratch = config.getoption("scratch_dir")
    if not hasattr(config, "workerinput"):
        os.makedirs(scratch)  # it exists when the workers start, as the out dir does
        return
    with open(os.path.join(scratch, config.workerinput["workerid"] + ".json"), "w") as out:
        json.dump({"rootdir": str(config.rootpath), "inifile": str(config.inipath)}, out)
"""


def test_workers_start_with_the_controllers_rootdir_and_ini_file(suite, calc, tmp_path_factory):
    # Any plugin's path option given with a space is a test path to pytest's rootdir choice;
    # a worker that redid the choice once the path exists would read another ini file.
    suite.instances([calc.row()])
    (suite.path / "scratchplugin.py").write_text(SCRATCH_PLUGIN)
    scratch = tmp_path_factory.mktemp("elsewhere") / "scratch"
    result = suite.run("-p", "scratchplugin", "--scratch-dir", str(scratch), "--arena-arms=GOLD", "-n", "2")
    result.assert_outcomes(passed=1)
    seen = [json.loads(path.read_text()) for path in sorted(scratch.glob("gw*.json"))]
    assert seen == [{"rootdir": str(suite.path), "inifile": str(suite.path / "pyproject.toml")}] * 2
    assert len(suite.ledger()) == 1


@pytest.mark.parametrize("option,value,expected", [
    ("--arena-verify-on", "tree", "*--arena-verify-on: 'tree' is not one of patch, workspace*"),
    ("--arena-repeat", "0", "*--arena-repeat: '0' is not a whole number of at least 1*"),
    ("--arena-verify-timeout", "soon", "*--arena-verify-timeout: 'soon' is not a positive number*"),
    # "²".isdigit() is true, but it is not a number int() reads.
    ("--arena-repeat", "²", "*--arena-repeat: '²' is not a whole number of at least 1*"),
    ("--arena-max-tokens", "²", "*--arena-max-tokens: '²' is not a whole number of at least 0*"),
    ("--arena-lock-heartbeat", "90", "*option --arena-lock-heartbeat (90 s) must be shorter than "
                                     "default of --arena-lock-stale (90 s)*"),
])
def test_bad_option_values_are_usage_errors(suite, calc, option, value, expected):
    suite.instances([calc.row()])
    result = suite.run(option, value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])


BAD_ROWS = [
    pytest.param("{not json", "demo.jsonl:2: not valid JSON*each line must be one JSON object", id="malformed"),
    pytest.param({"base_commit": None}, "demo.jsonl:2: field 'base_commit': is required but missing",
                 id="missing-field"),
    pytest.param({"base_commit": "xyz"}, "demo.jsonl:2: field 'base_commit': 'xyz' does not match*"
                 "expected a commit sha*", id="bad-commit"),
    pytest.param({"instance_id": "../x"}, "demo.jsonl:2: field 'instance_id': *no '/' and no '..'*", id="dotdot"),
    pytest.param({"instance_id": "a/b"}, "demo.jsonl:2: field 'instance_id': *no '/' and no '..'*", id="slash"),
    # "(first defined on line 1)" while instances.py checks a file on its own, else "(already defined at ...:1)".
    pytest.param({"instance_id": "demo__calc-1"}, "demo.jsonl:2: field 'instance_id': duplicate 'demo__calc-1' "
                 "(*1)", id="duplicate"),
    pytest.param({"source": {"bundle": "repos/missing.bundle"}},
                 "demo.jsonl:2: field 'source.bundle': bundle 'repos/missing.bundle' not found*", id="no-bundle"),
    pytest.param({"source": None}, "demo.jsonl:2: field 'repo': has no 'source'*--arena-repos*", id="no-repo"),
    pytest.param({"FAIL_TO_PASS": "[not json"}, "demo.jsonl:2: field 'FAIL_TO_PASS': *JSON-encoded list*",
                 id="bad-test-list"),
    pytest.param({"verify": None}, "demo.jsonl:2: field 'verify': needs a 'verify' command or a 'FAIL_TO_PASS'*",
                 id="no-verify"),
]


@pytest.mark.parametrize("bad,message", BAD_ROWS)
def test_bad_instance_is_a_clean_collection_error_and_other_files_collect(suite, calc, bad, message):
    if isinstance(bad, str):
        line = bad
    else:
        row = calc.row("demo__calc-2")
        for key, value in bad.items():
            if value is None:
                row.pop(key, None)
            else:
                row[key] = value
        line = json.dumps(row)
    path = suite.instances([calc.row("demo__calc-1")])
    path.write_text(path.read_text() + line + "\n")
    suite.instances([calc.row("good__calc-3")], name="instances/good.jsonl")

    result = suite.run("--collect-only", "-q")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([f"*invalid instance file: *{message}*"])
    assert "INTERNALERROR" not in output
    assert "Traceback" not in output and "raise " not in output
    result.stdout.fnmatch_lines(["instances/good.jsonl::good__calc-3[[]GOLD[]]"])


def test_duplicate_id_across_files_names_both_places(suite, calc):
    suite.instances([calc.row("demo__calc-1")], name="instances/a.jsonl")
    suite.instances([calc.row("demo__calc-1")], name="instances/b.jsonl")
    result = suite.run("--collect-only", "-q")
    result.stdout.fnmatch_lines(
        ["*b.jsonl:1: field 'instance_id': duplicate 'demo__calc-1' (already defined at *a.jsonl:1)*"]
    )


def test_repo_found_under_arena_repos(suite, calc, tmp_path):
    repos = tmp_path / "repos"
    bundle(calc, tmp_path / "calc.bundle")
    import subprocess

    subprocess.run(["git", "clone", "-q", "--bare", str(tmp_path / "calc.bundle"), str(repos / "demo__calc.git")],
                   check=True)
    row = calc.row()
    del row["source"]
    suite.instances([row])
    result = suite.run("-q", f"--arena-repos={repos}", "--arena-arms", "GOLD")
    result.assert_outcomes(passed=1)


LIGHT_MODULES = {"pytest_swe_arena", "pytest_swe_arena.plugin", "pytest_swe_arena.settings",
                 "pytest_swe_arena.state", "pytest_swe_arena.hookspecs"}


def test_plugin_is_inert_and_light_without_arena_configuration(pytester):
    # Installing the plugin must cost other projects nothing: no sweep, no arms, no msgspec.
    pytester.makepyfile(test_plain=f"""
import sys


def test_ok():
    loaded = {{name for name in sys.modules if name.startswith("pytest_swe_arena")}}
    assert loaded <= {LIGHT_MODULES!r}, sorted(loaded - {LIGHT_MODULES!r})
    assert "msgspec" not in sys.modules
""")
    (pytester.path / "instances").mkdir()
    (pytester.path / "instances/x.jsonl").write_text("{broken\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "arena-out").exists()


ARMS_TOML = '[tool.swe_arena.arms.ALT]\nkind = "gold"\n'


@pytest.mark.parametrize("written", ["arms.toml", "~/arms.toml"])
def test_arena_config_in_ini_is_where_the_arms_are_read(suite, calc, tmp_path, monkeypatch, written):
    suite.instances([calc.row()])
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    (home if written.startswith("~") else suite.path).joinpath("arms.toml").write_text(ARMS_TOML)
    suite.ini_lines = [f'arena_config = "{written}"']
    result = suite.run("--collect-only", "-q", "--arena-arms=ALT")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    result.stdout.fnmatch_lines(["instances/demo.jsonl::demo__calc-1[[]ALT[]]", "1 test collected*"])

    suite.ini_lines = ['arena_config = "nowhere.toml"']
    result = suite.run("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*pyproject.toml: arena_config: {suite.path}/nowhere.toml does not exist*"])


def test_missing_instance_path_is_a_usage_error_naming_its_source(suite, calc):
    suite.instances([calc.row()])
    result = suite.run("--arena-instances=nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*option --arena-instances: 'nope' does not exist (*/nope); expected instance files*"])

    suite.ini_lines = ['arena_instances = ["instances", "gone.jsonl"]']
    result = suite.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*pyproject.toml: arena_instances: 'gone.jsonl' does not exist*"])


@pytest.mark.parametrize("arms_toml,expected", [
    pytest.param('[tool.swe_arena.arms.gold]\nkind = "gold"\n',
                 "*[[]tool.swe_arena.arms.gold[]]: arm 'gold' differs from 'GOLD' (built in) only in case*",
                 id="builtin"),
    pytest.param('[tool.swe_arena.arms.SOLO]\nkind = "empty"\n[tool.swe_arena.arms.solo]\nkind = "gold"\n',
                 "*[[]tool.swe_arena.arms.solo[]]: arm 'solo' differs from 'SOLO' (*[[]tool.swe_arena.arms.SOLO[]])"
                 " only in case, and patch files are named by the lower-cased arm name (solo)*", id="tables"),
    pytest.param('[tool.swe_arena.arms.SUP-r2]\nkind = "empty"\n',
                 "*[[]tool.swe_arena.arms.SUP-r2[]]: an arm name must not end in '-r' and digits*", id="trial-suffix"),
])
def test_arm_names_that_would_collide_are_usage_errors(suite, calc, arms_toml, expected):
    suite.instances([calc.row()])
    suite.arms_toml = arms_toml
    result = suite.run("--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])


def test_usage_errors_name_the_ini_value_they_came_from(suite, calc):
    suite.instances([calc.row()])
    suite.ini_lines = ['arena_arms = "GOLD,NOPE"']
    result = suite.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*pyproject.toml: arena_arms: unknown arm 'NOPE'; known arms: EMPTY, GOLD*"])

    (suite.path / "specs.toml").write_text("[broken\n")
    suite.ini_lines = ['arena_env_specs = "specs.toml"']
    result = suite.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*pyproject.toml: arena_env_specs: *specs.toml: cannot read TOML*"])


def test_an_arm_kind_from_two_plugins_names_both(suite, calc):
    suite.instances([calc.row()])
    suite.pytester.makeconftest(
        "class Mine:\n    def __init__(self, spec, suite):\n        self.spec = spec\n\n\n"
        "def pytest_arena_arm_kinds():\n    return {'gold': Mine}\n"
    )
    result = suite.run("--arena-arms=GOLD")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*arm kind 'gold' is provided by two plugins, * and *; rename it in one of them"])
    message = result.stderr.str()
    assert "swe-arena-reference" in message and "conftest.py" in message


def test_collection_reads_each_instance_file_once_and_compiles_the_schema_once(suite, calc, monkeypatch):
    # Per-item work grows with instances x arms x trials: files and the schema must not be redone per item.
    from pytest_swe_arena.instances import loading

    suite.instances([calc.row(f"demo__calc-{n}") for n in (1, 2, 3)])
    suite.instances([calc.row("other__calc-9", repo="other/widgets")], name="instances/other.jsonl")
    reads: list[str] = []
    read_bytes = Path.read_bytes

    def counting_read_bytes(path):
        if path.suffix == ".jsonl":
            reads.append(path.name)
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", counting_read_bytes)
    loading._validator.cache_clear()
    result = suite.run("--collect-only", "-q", "--arena-repeat=3", subprocess=False)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["24 tests collected*"])  # 4 instances x 2 arms x 3 trials
    assert sorted(reads) == ["demo.jsonl", "other.jsonl"]
    assert loading._validator.cache_info().misses == 1


def test_a_misspelt_required_setting_is_an_unknown_key_with_the_close_match(suite, calc):
    suite.instances([calc.row()])
    suite.arms_toml = '[tool.swe_arena.arms.X]\nkind = "opencode"\nmodle = "openai/gpt-5"\n'
    result = suite.run("--arena-arms", "X")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*[[]tool.swe_arena.arms.X[]]: field 'modle': unknown setting for kind 'opencode' "
                                 "(did you mean 'model'? it is required)*"])
    assert "is required (a string)" not in result.stderr.str()
    suite.arms_toml = ('[tool.swe_arena.arms.X]\nkind = "opencode"\nmodel = "openai/gpt-5"\n'
                       'executable = "/bin/true"\ntimout = 60\n')
    result = suite.run("--arena-arms", "X")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*field 'timout': unknown setting for kind 'opencode' (did you mean 'timeout'?); "
                                 "known: *model*timeout*"])


def test_an_arena_config_of_bare_arms_tables_says_where_arms_go(suite, calc):
    suite.instances([calc.row()])
    (suite.path / "arms.toml").write_text('[arms.X]\nkind = "gold"\n')
    result = suite.run("--arena-arms", "X", "--arena-config", "arms.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {suite.path / 'arms.toml'}: [[]arms[]] is at the top level, where it is not "
                                 "read: arms go in [[]tool.swe_arena.arms.NAME[]] tables (rename [[]arms.X[]] to "
                                 "[[]tool.swe_arena.arms.X[]]*"])
    assert "unknown arm" not in result.stderr.str()
    (suite.path / "arms.toml").write_text('[tool.other]\nx = 1\n')
    result = suite.run("--arena-arms", "X", "--arena-config", "arms.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: option --arena-config: *arms.toml has no [[]tool.swe_arena[]] table, so it "
                                 "configures nothing; arms go in [[]tool.swe_arena.arms.NAME[]] tables"])
    (suite.path / "arms.toml").write_text('[tool.swe_arena.arms.X]\nkind = "gold"\n')
    assert suite.run("--arena-arms", "X", "--arena-config", "arms.toml").ret != pytest.ExitCode.USAGE_ERROR
