"""The reference parts of the docs, generated from the code so they cannot drift from it.

mkdocs runs this file as a hook (``hooks:`` in ``mkdocs.yml``):

- ``on_files`` adds the pages whose text lives beside the code it describes
  (``bench/README.md``, ``instances/README.md``), so each text has one home;
- ``on_page_markdown`` replaces each ``<!-- generated: NAME -->`` marker with a
  table built from ``pytest_swe_arena``: every option (``settings.OPTIONS``), the
  fields of an instance, of a ledger row and of ``summary.json`` (the JSON Schemas in
  the package; the ledger's is generated from ``ledger.row.LedgerRow``), the cell
  statuses (``outcome.STATUSES``), what can go wrong in each phase of a cell with
  the status it gives (``worker.attribution.FAULTS``), and each built-in arm kind's
  settings as the kind declares them (its ``arm_settings``: ``arm-settings-KIND``), with
  the settings every agent kind shares (``arm-settings-shared``).

A marker without a generator, a generator whose marker no page holds, and a schema
field that nothing describes all stop the build. Field descriptions come from the
schema when it has one, else from ``fields.toml`` beside this file (for instances the
schema's descriptions say what is accepted, ``fields.toml`` what a field means). A ledger
row's fields are all described in the schema, by their declarations in ``ledger/row.py``.
"""

from __future__ import annotations

import functools
import json
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files
    from mkdocs.structure.pages import Page

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FIELDS_FILE = HERE / "fields.toml"
MARKER = re.compile(r"<!-- generated: ([a-z-]+) -->")
#: Pages whose source is a README beside the code: site path -> repository path.
INCLUDED_PAGES = {"benchmarks.md": "bench/README.md", "bundled-suite.md": "instances/README.md"}


#: Where a field of a section that ``fields.toml`` does not describe is described instead.
WHERE_TO_DESCRIBE = {"ledger": "describe it beside its declaration in pytest_swe_arena/ledger/row.py"}


class DocsDriftError(Exception):
    """The code and the docs disagree: a field without a description, or a description of nothing."""


def _descriptions(section: str) -> dict[str, str]:
    table = tomllib.loads(FIELDS_FILE.read_text(encoding="utf-8")).get(section, {})
    return {str(key): str(value) for key, value in table.items()}


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _plain(text: str) -> str:
    """Text written for a terminal (a help text), shown as it is: no Markdown emphasis from ``*.jsonl``."""
    return re.sub(r"([\\`*_\[\]])", r"\\\1", text).replace("<", "&lt;")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# -- options ---------------------------------------------------------------------------------------


def options_table() -> str:
    """Every ``--arena-*`` option: the flag, its ini twin, its default and its help text."""
    from pytest_swe_arena.settings import OPTIONS

    rows = []
    for option in OPTIONS:
        if option.switch:
            flag, ini = f"`{option.flag}`", f"`{option.ini_name}` (true / false)"
        elif option.many:
            flag = f"`{option.flag} {option.metavar} [{option.metavar} ...]`"
            ini = f"`{option.ini_name}` (one per line)"
        else:
            flag, ini = f"`{option.flag} {option.metavar}`", f"`{option.ini_name}`"
        default = f"`{option.default}`" if option.default is not None else "none"
        rows.append([flag, ini, default, _plain(option.help)])
    return _table(["option", "ini / pyproject key", "default", "what it does"], rows)


# -- statuses --------------------------------------------------------------------------------------


def statuses_table() -> str:
    """Each cell status as ``outcome.STATUS_TABLE`` defines it: pytest outcome, counted, resume, mark, meaning."""
    from pytest_swe_arena.outcome import STATUS_TABLE

    rows = []
    for status, meaning in STATUS_TABLE.items():
        rows.append([f"`{status}`", meaning.pytest_outcome, "yes" if meaning.counted else "no",
                     "kept" if meaning.final else "runs again", meaning.glyph, ", ".join(meaning.swebench),
                     meaning.description])
    return _table(["status", "pytest outcome", "in the resolve rate", "on `--arena-resume`", "report.html",
                   "SWE-bench's report ([evaluate](coming-from-swe-bench.md))", "meaning"], rows)


def attribution_table() -> str:
    """What can go wrong in each phase of a cell and the status it gives (``worker.attribution.FAULTS``)."""
    from pytest_swe_arena.worker.attribution import FAULTS

    rows = []
    for fault in FAULTS:
        if fault.status is None:
            status, counted = "the arm's ending", "as its ending"
        else:
            status, counted = f"`{fault.status}`", "yes" if fault.status.counted else "no"
            if fault.ending_first:
                status += " (the arm's ending, if it had one)"
            if fault.ends_arm:
                status += " as the arm's ending"
        rows.append([fault.phase, fault.what, status, counted, fault.why])
    return _table(["phase", "what goes wrong", "status", "in the resolve rate", "why"], rows)


# -- arm settings ----------------------------------------------------------------------------------


def kind_settings(kind: str) -> tuple[Any, ...]:
    """The settings a built-in kind declares (``arm_settings`` of its class), in its order."""
    import importlib

    from pytest_swe_arena.arms.kinds import BUILTIN_KINDS, PACKAGE

    module = importlib.import_module(f"{PACKAGE}.{BUILTIN_KINDS[kind]}")
    return tuple(module.pytest_arena_arm_kinds()[kind].arm_settings)


def arm_settings_table(kind: str) -> str:
    """A kind's settings (the shared ones are in ``shared_arm_settings_table``, and left out here)."""
    from pytest_swe_arena.arms.base import AGENT_SETTINGS

    shared = {setting.name for setting in AGENT_SETTINGS}
    declared = kind_settings(kind)
    rows = [[f"`{setting.name}`", setting.default_text, setting.accepts, setting.meaning]
            for setting in declared if setting.name not in shared]
    markdown = _table(["setting", "default", "accepts", "meaning"], rows)
    common = {setting.name: setting.default_text for setting in AGENT_SETTINGS}
    taken = [f"`{setting.name}`" + (f" ({setting.default_text})" if setting.default_text != common[setting.name]
                                    else "") for setting in declared if setting.name in shared]
    if taken:
        markdown += (f"\nplus {', '.join(taken)} "
                     "([settings every agent kind accepts](index.md#settings-every-agent-kind-accepts)).\n")
    return markdown


def shared_arm_settings_table() -> str:
    """The settings every agent kind takes (``arms.base.AGENT_SETTINGS``), with each kind's own default or meaning."""
    from pytest_swe_arena.arms.base import AGENT_SETTINGS
    from pytest_swe_arena.arms.kinds import BUILTIN_KINDS

    rows = []
    for shared in AGENT_SETTINGS:
        default, meaning = shared.default_text, shared.meaning
        taken = [(kind, setting) for kind in BUILTIN_KINDS for setting in kind_settings(kind)
                 if setting.name == shared.name]
        defaults = [f"`{kind}`: {setting.default_text}" for kind, setting in taken
                    if setting.default_text != default]
        meanings = [f"`{kind}`: {setting.meaning}" for kind, setting in taken if setting.meaning != meaning]
        rows.append([f"`{shared.name}`", default + (f" ({'; '.join(defaults)})" if defaults else ""), shared.accepts,
                     meaning + (f" ({'; '.join(meanings)})" if meanings else "")])
    return _table(["setting", "default", "accepts", "meaning"], rows)


def _arm_settings_generators() -> dict[str, Callable[[], str]]:
    from pytest_swe_arena.arms.kinds import BUILTIN_KINDS

    generators: dict[str, Callable[[], str]] = {"arm-settings-shared": shared_arm_settings_table}
    for kind in BUILTIN_KINDS:
        if kind_settings(kind):
            generators[f"arm-settings-{kind}"] = functools.partial(arm_settings_table, kind)
    return generators


# -- schema fields ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SchemaField:
    """One property of a JSON Schema, named by its path (``usage.cost_usd``, ``arms[].cells``)."""

    path: str
    type: str
    required: bool
    #: The property's own description in the schema.
    schema_description: str | None
    #: The description of the definition the property refers to (``$ref``), which then covers its fields.
    reference_description: str | None


def _resolve(node: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    reference = node.get("$ref")
    return defs[reference.rsplit("/", 1)[-1]] if reference else node


def type_text(node: Mapping[str, Any], defs: Mapping[str, Any]) -> str:
    """A short reading of a schema's type: ``integer or null``, ``one of `a`, `b```, ``array of string``."""
    node = _resolve(node, defs)
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return "one of " + ", ".join(f"`{json.dumps(value)}`" for value in node["enum"])
    for combined in ("oneOf", "anyOf"):
        if combined in node:
            return " or ".join(type_text(alternative, defs) for alternative in node[combined])
    kinds = node.get("type", "any")
    names = [kinds] if isinstance(kinds, str) else list(kinds)
    texts = []
    for name in names:
        if name == "object" and node.get("maxProperties") == 0:
            texts.append("`{}`")
        elif name == "array" and isinstance(node.get("items"), Mapping):
            texts.append("array of " + type_text(node["items"], defs))
        elif name == "object" and isinstance(node.get("additionalProperties"), Mapping):
            texts.append("object of " + type_text(node["additionalProperties"], defs))
        elif name == "string" and "pattern" in node:
            texts.append(f"string matching `{node['pattern']}`")
        else:
            texts.append(name)
    return " or ".join(texts)


def schema_fields(schema: Mapping[str, Any]) -> list[SchemaField]:
    """Every property of ``schema``, depth first, through references, ``oneOf`` and array items.

    Not into ``additionalProperties`` (a map of models, of phases: one entry describes them all), nor
    into a definition that has its own description (the description covers it).
    """
    defs: Mapping[str, Any] = schema.get("$defs", {})
    found: list[SchemaField] = []

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        node = _resolve(node, defs)
        for alternative in [*node.get("oneOf", []), *node.get("anyOf", [])]:
            walk(alternative, prefix)
        items = node.get("items")
        if isinstance(items, Mapping):
            walk(items, prefix.removesuffix(".") + "[].")
        required = set(node.get("required", []))
        for name, child in node.get("properties", {}).items():
            target = _resolve(child, defs)
            reference = target.get("description") if target is not child else None
            found.append(SchemaField(prefix + name, type_text(child, defs), name in required,
                                     child.get("description"), reference))
            if reference is None:
                walk(child, f"{prefix}{name}.")

    walk(schema, "")
    return found


def _check_described(section: str, names: Sequence[str], descriptions: Mapping[str, str],
                     described_in_code: Sequence[str] = (), fallback_in_code: Sequence[str] = ()) -> None:
    """Every name has a description; ``fields.toml`` describes nothing else, and nothing the code describes.

    :param described_in_code: names whose schema property has a description of its own.
    :param fallback_in_code: names described by the definition they refer to, which
        ``fields.toml`` may make more precise.
    """
    missing = [name for name in names
               if name not in descriptions and name not in described_in_code and name not in fallback_in_code]
    stale = [name for name in descriptions if name not in names]
    doubled = [name for name in descriptions if name in described_in_code]
    problems = []
    if missing:
        where = WHERE_TO_DESCRIBE.get(section, f"add it to [{section}]")
        problems.append(f"no description for {', '.join(missing)} ({where})")
    if stale:
        problems.append(f"[{section}] describes what does not exist: {', '.join(stale)}")
    if doubled:
        problems.append(f"[{section}] repeats the schema's own description of {', '.join(doubled)}")
    if problems:
        raise DocsDriftError(f"{FIELDS_FILE}: " + "; ".join(problems))


def load_schema(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files("pytest_swe_arena").joinpath(f"schemas/{name}").read_text())
    return data


def fields_table(schema_name: str, section: str, markdown: bool = False) -> str:
    """The fields of one of the package's JSON Schemas: path, type, required, meaning.

    :param markdown: the schema's descriptions are Markdown (the ledger's, written for these docs), not plain
        text shown as it is.
    """
    fields = schema_fields(load_schema(schema_name))
    descriptions = _descriptions(section)
    _check_described(section, [field.path for field in fields], descriptions,
                     [field.path for field in fields if field.schema_description],
                     [field.path for field in fields if field.reference_description])
    rows = []
    for field in fields:
        own = field.schema_description or field.reference_description
        text = descriptions.get(field.path) or (_plain(own) if own and not markdown else own or "")
        rows.append([f"`{field.path}`", field.type, "yes" if field.required else "", text])
    return _table(["field", "type", "required", "meaning"], rows)


def instance_fields_table() -> str:
    """The fields of an instance: what the schema accepts (its own words, as its errors say it) and what they mean."""
    schema = load_schema("instance.schema.json")
    fields = schema_fields(schema)
    meanings = _descriptions("instance")
    _check_described("instance", [field.path for field in fields], meanings)
    either = sorted(name for alternative in schema.get("anyOf", []) for name in alternative.get("required", []))
    rows = []
    for field in fields:
        others = " or ".join(f"`{name}`" for name in either if name != field.path)
        required = "yes" if field.required else (f"unless {others} is given" if field.path in either else "")
        accepted = _plain(field.schema_description) if field.schema_description else field.type
        rows.append([f"`{field.path}`", required, accepted, meanings[field.path]])
    return _table(["field", "required", "accepted", "meaning"], rows)


#: Marker name -> the Markdown that replaces it.
GENERATORS: dict[str, Callable[[], str]] = {
    "options": options_table,
    "statuses": statuses_table,
    "attribution": attribution_table,
    "instance-fields": instance_fields_table,
    "ledger-fields": lambda: fields_table("ledger.schema.json", "ledger", markdown=True),
    "summary-fields": lambda: fields_table("summary.schema.json", "summary"),
    **_arm_settings_generators(),
}


def fill_markers(markdown: str, where: str, used: set[str] | None = None) -> str:
    """``markdown`` with every generated marker replaced; an unknown marker is an error naming ``where``."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        generator = GENERATORS.get(name)
        if generator is None:
            raise DocsDriftError(f"{where}: unknown marker {match.group(0)}; known: {', '.join(sorted(GENERATORS))}")
        if used is not None:
            used.add(name)
        return generator()

    return MARKER.sub(replace, markdown)


# -- mkdocs hooks ----------------------------------------------------------------------------------

#: The markers the pages of the current build hold (reset when a build starts).
_used_markers: set[str] = set()


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    _used_markers.clear()  # `mkdocs serve` builds again in the same process
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    from mkdocs.structure.files import File

    for site_path, repository_path in INCLUDED_PAGES.items():
        files.append(File.generated(config, site_path, abs_src_path=str(ROOT / repository_path)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    from mkdocs.exceptions import PluginError

    try:
        return fill_markers(markdown, page.file.src_uri, _used_markers)
    except DocsDriftError as error:
        raise PluginError(str(error)) from None


def on_post_build(config: MkDocsConfig) -> None:
    from mkdocs.exceptions import PluginError

    unused = sorted(set(GENERATORS) - _used_markers)
    if unused:
        raise PluginError(f"no page holds the marker of {', '.join(unused)}: add <!-- generated: NAME --> to one")
