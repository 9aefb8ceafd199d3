"""Unit tests of the settings: one declaration per option, CLI over ini over default, errors that name the source."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from pytest_swe_arena.settings import (
    OPTIONS,
    check_out_dir,
    find_config_file,
    load_settings,
    read_arena_table,
    values_given_apart,
)

pytest_plugins = ["pytester"]
OPTION = {option.noun: option for option in OPTIONS}


def test_every_option_has_one_flag_one_ini_name_and_a_help_text() -> None:
    flags = [option.flag for option in OPTIONS]
    assert len(set(flags)) == len(flags) and all(flag.startswith("--arena-") for flag in flags)
    assert all(option.ini_name == "arena_" + option.noun.replace("-", "_") and option.help for option in OPTIONS)


@pytest.mark.parametrize(("noun", "value", "expected"), [
    ("repeat", "3", 3), ("max-usd", "0", 0.0), ("max-tokens", " 12 ", 12), ("verify-timeout", "1.5", 1.5),
    ("arms", "A, B", ("A", "B")), ("run-dir-max-bytes", "4096", 4096), ("run-dir-max-bytes", "64K", 65536),
    ("patch-max-bytes", "2 MiB", 2 * 1024 * 1024), ("run-dir-max-file-bytes", "1g", 1024 ** 3),
    ("run-dir-max-files", "10", 10), ("worker-start", "popen", "popen"), ("worker-start", "fork", "fork"),
])
def test_a_good_value_parses(noun: str, value: str, expected: object) -> None:
    assert OPTION[noun].parse(value, "option") == expected


@pytest.mark.parametrize(("noun", "value", "accepted"), [
    ("repeat", "0", "at least 1"), ("repeat", "²", "at least 1"), ("max-usd", "nan", "finite non-negative"),
    ("max-usd", "-1", "finite non-negative"), ("verify-timeout", "inf", "positive number"),
    ("arms", " , ", "comma-separated"), ("arms", "A,A", "listed twice"),
    ("run-dir-max-bytes", "0", "size in bytes: a whole number of at least 1, optionally followed by K, M or G"),
    ("run-dir-max-bytes", "1.5M", "size in bytes"), ("patch-max-bytes", "4T", "size in bytes"),
    ("run-dir-max-files", "0", "at least 1"), ("worker-start", "spawn", "'spawn' is not one of fork, popen"),
])
def test_a_bad_value_is_a_usage_error_naming_its_source_and_what_is_accepted(noun: str, value: str,
                                                                             accepted: str) -> None:
    with pytest.raises(pytest.UsageError, match=f"^pyproject.toml: arena_x: .*{accepted}"):
        OPTION[noun].parse(value, "pyproject.toml: arena_x")


def test_values_given_as_arguments_of_their_own_are_found() -> None:
    args = ["--arena-out", "out", "-k", "x", "--arena-instances", "a.jsonl", "b.jsonl", "--arena-resume", "c"]
    assert values_given_apart(args) == [("--arena-out", "out"), ("--arena-instances", "a.jsonl"),
                                        ("--arena-instances", "b.jsonl")]


def test_an_out_dir_under_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    check_out_dir(tmp_path / "new" / "out", "option --arena-out")
    with pytest.raises(pytest.UsageError, match="lies under .*file, which is a file"):
        check_out_dir(tmp_path / "file" / "out", "option --arena-out")


def test_the_arena_table_comes_from_the_named_file_or_the_rootdirs_pyproject(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.swe_arena]\nworker_suffix = 'x'\n")
    assert find_config_file(None, "-", tmp_path, None) == pyproject
    assert read_arena_table(pyproject) == {"worker_suffix": "x"}
    with pytest.raises(pytest.UsageError, match="missing.toml does not exist"):
        find_config_file(tmp_path / "missing.toml", "option --arena-config", tmp_path, None)
    pyproject.write_text("[tool]\nswe_arena = 3\n")
    with pytest.raises(pytest.UsageError, match=r"must be a table"):
        read_arena_table(pyproject)
    pyproject.write_text("[tool.swe_arena\n")
    with pytest.raises(pytest.UsageError, match="cannot read TOML"):
        read_arena_table(pyproject)


def test_the_command_line_wins_over_the_ini_file_which_wins_over_the_default(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\narena_repeat = 2\narena_arms = GOLD\n")
    settings = load_settings(pytester.parseconfig("--arena-repeat=5"))
    assert (settings.repeat, settings.arms, settings.verify_on) == (5, ("GOLD",), "patch")
    assert settings.enabled and settings.sources["repeat"] == "option --arena-repeat"
    assert "arena_arms" in settings.sources["arms"]


def test_without_any_arena_setting_the_plugin_stays_out_of_the_way(pytester: pytest.Pytester) -> None:
    assert not load_settings(pytester.parseconfig()).enabled


def test_a_bad_ini_value_names_the_ini_file(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\narena_repeat = many\n")
    with pytest.raises(pytest.UsageError, match=r"tox.ini.*arena_repeat.*'many'"):
        load_settings(pytester.parseconfig())


@pytest.mark.parametrize(("value", "expected"), [
    ("10.0.0.5", ("10.0.0.5", 0)), ("10.0.0.5:8750", ("10.0.0.5", 8750)), ("[fd00::1]:9", ("fd00::1", 9)),
    ("controller.lan", ("controller.lan", 0)),
])
def test_a_meter_listen_address_is_a_host_and_an_optional_port(value: str, expected: tuple[str, int]) -> None:
    assert OPTION["meter-listen"].parse(value, "option") == expected


@pytest.mark.parametrize(("value", "accepted"), [
    ("0.0.0.0:8750", "names no address the workers could call"), ("[::]", "names no address"),
    ("fd00::1", r"HOST\[:PORT\]"), ("10.0.0.5:70000", "a port from 1 to 65535"), ("a host", r"HOST\[:PORT\]"),
])
def test_a_meter_listen_address_workers_cannot_call_is_refused(value: str, accepted: str) -> None:
    with pytest.raises(pytest.UsageError, match=f"^pyproject.toml: arena_meter_listen: .*{accepted}"):
        OPTION["meter-listen"].parse(value, "pyproject.toml: arena_meter_listen")


def test_what_the_readme_and_swe_bench_rows_need_is_a_core_dependency() -> None:
    """`pip install -e .` alone runs the README's command (-n needs xdist) and SWE-bench rows' envs (uv, PyYAML);
    only the metering proxy (aiohttp) is an extra, refused at the start when missing (tests/spend/test_meter.py)."""
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    def names(requirements: list[str]) -> set[str]:
        return {re.split(r"[<>=!~ \[]", requirement)[0].lower() for requirement in requirements}

    core = names(project["dependencies"])
    assert {"pytest-xdist", "uv", "pyyaml"} <= core
    meter = names(project["optional-dependencies"]["meter"])
    assert "aiohttp" not in core and {"aiohttp", "multidict", "yarl"} == meter
