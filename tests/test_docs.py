"""The documentation site: its generated reference pages follow the code, and it builds with --strict."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pytest_swe_arena.arms.base import AGENT_SETTINGS
from pytest_swe_arena.arms.kinds import BUILTIN_KINDS
from pytest_swe_arena.outcome import CellStatus
from pytest_swe_arena.settings import OPTIONS

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "pytest_swe_arena" / "schemas"


@pytest.fixture(scope="module")
def reference() -> Iterator[ModuleType]:
    """The mkdocs hook module (docs/hooks/reference.py), imported as mkdocs imports it: by path."""
    name = "docs_hooks_reference"
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[name]


def property_names(node: Any) -> Iterator[str]:
    """Every name under any ``properties`` of a JSON Schema, definitions included (read without the hook).

    A definition with a description of its own is described as a whole (the summary's five numbers).
    """
    if isinstance(node, dict):
        for name, child in node.get("properties", {}).items():
            yield name
            yield from property_names(child)
        for key, child in node.items():
            if key == "$defs":
                yield from property_names([definition for definition in child.values()
                                           if "description" not in definition])
            elif key != "properties":
                yield from property_names(child)
    elif isinstance(node, list):
        for child in node:
            yield from property_names(child)


def documented_paths(table: str) -> list[str]:
    """The field paths in the first column of a generated table."""
    return re.findall(r"^\| `([^`]+)` \|", table, flags=re.MULTILINE)


def test_the_options_page_lists_every_option_with_its_ini_twin_default_and_help(reference: ModuleType) -> None:
    table = reference.options_table()
    rows = table.splitlines()[2:]
    assert len(rows) == len(OPTIONS)
    for option, row in zip(OPTIONS, rows, strict=True):
        assert f"`{option.flag}" in row and f"`{option.ini_name}`" in row
        assert (f"`{option.default}`" if option.default is not None else "| none |") in row
        # The help text as a terminal shows it, once Markdown's escapes are read.
        assert option.help in re.sub(r"\\(.)", r"\1", row).replace("&lt;", "<")


@pytest.mark.parametrize(("schema", "generator"), [
    ("ledger.schema.json", "ledger-fields"),
    ("summary.schema.json", "summary-fields"),
    ("instance.schema.json", "instance-fields"),
])
def test_the_field_references_list_every_schema_property_with_a_description(
    reference: ModuleType, schema: str, generator: str,
) -> None:
    table = reference.GENERATORS[generator]()
    paths = documented_paths(table)
    names = set(property_names(json.loads((SCHEMAS / schema).read_text())))
    segments = {segment.removesuffix("[]") for path in paths for segment in path.split(".")}
    # Maps (a model -> usage, a test id -> status) are described by their entry, so the
    # usage fields of ``models`` are those of ``usage``; every other property has its own path.
    assert names <= segments, f"not in the {schema} reference: {sorted(names - segments)}"
    for line in table.splitlines()[2:]:
        assert line.rstrip(" |").rsplit("|", 1)[-1].strip(), f"no description: {line}"


def test_the_status_table_has_every_status(reference: ModuleType) -> None:
    table = reference.statuses_table()
    assert documented_paths(table) == list(CellStatus)


@pytest.mark.parametrize("kind", sorted(BUILTIN_KINDS))
def test_each_kind_page_lists_every_setting_the_kind_declares(reference: ModuleType, kind: str) -> None:
    """The kind's page holds its generated table, and every setting it reads (its ``arm_settings``) is on it."""
    declared = [setting.name for setting in reference.kind_settings(kind)]
    if not declared:  # gold and empty take none
        assert f"arm-settings-{kind}" not in reference.GENERATORS
        return
    pages = [path for path in (ROOT / "docs" / "arms").glob("*.md")
             if f"<!-- generated: arm-settings-{kind} -->" in path.read_text()]
    assert len(pages) == 1, pages
    page = reference.fill_markers(pages[0].read_text(), pages[0].name)
    assert [name for name in declared if f"`{name}`" not in page] == []
    if "timeout" in declared:  # the agent kinds: the shared table has each shared setting, with this kind's default
        shared = reference.shared_arm_settings_table()
        assert [setting.name for setting in AGENT_SETTINGS] == documented_paths(shared)
        assert {setting.name for setting in AGENT_SETTINGS} <= set(declared)


def test_a_settings_table_shows_the_kinds_own_default(reference: ModuleType) -> None:
    """The supervisor's timeout and suffix differ from the other kinds': both tables say so, from the declarations."""
    shared = reference.shared_arm_settings_table()
    assert "| `timeout` | `1000` (`supervisor`: `2800`) |" in shared
    assert "| `worker_suffix` | the suite's `worker_suffix` (`supervisor`: `\"\"`) |" in shared
    assert "| `model` | required | a string | `PROVIDER/MODEL` |" in reference.arm_settings_table("opencode")
    assert "| `model` | none | a string |" in reference.arm_settings_table("command")
    assert "`model`" not in reference.arm_settings_table("supervisor").replace("`worker_model`", "").replace(
        "`driver_model`", "")


def test_a_schema_field_nobody_describes_stops_the_build(
    reference: ModuleType, monkeypatch: pytest.MonkeyPatch,
) -> None:
    schema = json.loads((SCHEMAS / "ledger.schema.json").read_text())
    schema["properties"]["sandbox_profile"] = {"type": "string"}
    monkeypatch.setattr(reference, "load_schema", lambda name: schema)
    with pytest.raises(reference.DocsDriftError, match=r"no description for sandbox_profile \(describe it beside its "
                                                       r"declaration in pytest_swe_arena/ledger/row.py\)"):
        reference.fields_table("ledger.schema.json", "ledger")


def test_a_description_of_a_field_that_is_gone_stops_the_build(
    reference: ModuleType, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The ledger's fields are described in its schema, by the model: summary.json's are in fields.toml.
    schema = json.loads((SCHEMAS / "summary.schema.json").read_text())
    del schema["properties"]["run_id"]
    monkeypatch.setattr(reference, "load_schema", lambda name: schema)
    with pytest.raises(reference.DocsDriftError, match=r"\[summary\] describes what does not exist: run_id"):
        reference.fields_table("summary.schema.json", "summary")


def test_an_unknown_marker_names_the_page_and_the_known_ones(reference: ModuleType) -> None:
    with pytest.raises(reference.DocsDriftError, match=r"options\.md: unknown marker <!-- generated: optoins -->; "
                                                       r"known: .*options"):
        reference.fill_markers("# x\n<!-- generated: optoins -->\n", "options.md")


def test_every_generator_has_its_marker_on_a_page(reference: ModuleType) -> None:
    pages = "\n".join(path.read_text() for path in (ROOT / "docs").rglob("*.md"))
    assert set(reference.MARKER.findall(pages)) == set(reference.GENERATORS)


def test_mkdocs_build_strict_succeeds(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="mkdocs is not installed: pip install -e '.[docs]' (.ci/run does)")
    site = tmp_path / "site"
    completed = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=600,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    options_page = (site / "options" / "index.html").read_text()
    assert all(option.flag in options_page for option in OPTIONS)
    assert "patch_sha256" in (site / "outputs" / "index.html").read_text()
    # The pages whose text lives beside the code are in the site; the hook is not.
    assert (site / "benchmarks" / "index.html").is_file() and (site / "bundled-suite" / "index.html").is_file()
    assert not (site / "hooks").exists()
