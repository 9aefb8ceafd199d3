"""Instances: the model, the JSON/JSONL loaders, and schema validation.

An instance file is JSON Lines or a JSON array of objects, each a superset of
a SWE-bench dataset row. Every problem is reported as an ``InstanceFileError``
naming the file, the line and the field, so a collection error tells the user
exactly what to fix.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

INSTANCE_SUFFIXES = (".jsonl", ".json")
#: Fields of a SWE-bench row an instance card keeps as they are, when the row has them.
CARD_EXTRA_FIELDS = ("hints_text", "created_at", "version", "environment_setup_commit")


class InstanceFileError(Exception):
    """A problem in an instance file, located to the file, line and field."""

    def __init__(self, path: Path, line: int | None, message: str, field: str | None = None):
        self.path = path
        self.line = line
        self.field = field
        self.message = message
        where = f"{path}:{line}" if line else str(path)
        what = f"field {field!r}: " if field else ""
        super().__init__(f"{where}: {what}{message}")


@dataclass(frozen=True)
class Source:
    """Where the repository comes from: ``git`` (path or URL), ``bundle`` (file) or ``image``."""

    kind: str
    location: str

    def describe(self) -> str:
        return f"{self.kind} {self.location}"


@dataclass(frozen=True)
class Instance:
    """One task: a repository at a commit, a problem statement, and how to verify it."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    source: Source
    patch: str | None
    test_patch: str | None
    verify: str | None
    test_cmd: str | None
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    env: Mapping[str, Any] | None
    marks: tuple[str, ...]
    #: The row as loaded, passed through to outputs (version, hints_text, ...).
    row: Mapping[str, Any] = field(repr=False)
    path: Path = field(repr=False)
    line: int = field(repr=False)

    @cached_property
    def content_sha256(self) -> str:
        """Hash of the row's content: part of the cell key, so an edited instance runs again."""
        content: Any = self.row
        if self.env != self.row.get("env"):
            # The environment came from --arena-env-specs: editing the spec runs the cell again.
            content = {"row": self.row, "env": self.env}
        canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def card(self) -> dict[str, Any]:
        """The task as a reader of the results wants it; the controller keeps it in ``runs/<iid>/instance.json``."""
        extra = {key: self.row[key] for key in CARD_EXTRA_FIELDS if key in self.row}
        return {
            "instance_id": self.instance_id, "repo": self.repo, "base_commit": self.base_commit,
            "problem_statement": self.problem_statement, **extra,
            "FAIL_TO_PASS": list(self.fail_to_pass), "PASS_TO_PASS": list(self.pass_to_pass),
            "verify": self.verify, "test_cmd": self.test_cmd, "patch": self.patch, "test_patch": self.test_patch,
            "source": {"kind": self.source.kind, "location": self.source.location},
            "file": f"{self.path}:{self.line}",
        }

    @property
    def repo_mark(self) -> str:
        """The mark derived from the repository name: ``django/django`` -> ``django``."""
        return mark_name(self.repo.split("/")[-1])


def mark_name(text: str) -> str:
    name = re.sub(r"\W", "_", text)
    return name if name and not name[0].isdigit() else f"_{name}"


@lru_cache(maxsize=1)
def _validator() -> Any:
    import jsonschema

    schema = json.loads(
        resources.files("pytest_swe_arena").joinpath("schemas/instance.schema.json").read_text()
    )
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def read_rows(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line, object)`` for each row of a JSONL file or a JSON array file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InstanceFileError(path, None, f"cannot read: {error}") from None
    if path.suffix == ".jsonl":
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as error:
                raise InstanceFileError(
                    path, number, f"not valid JSON ({error.msg} at column {error.colno}); "
                    "each line must be one JSON object"
                ) from None
        return
    yield from _read_json_array(path, text)


def _read_json_array(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    decoder = json.JSONDecoder()

    def line_of(offset: int) -> int:
        return text.count("\n", 0, offset) + 1

    def fail(error: json.JSONDecodeError) -> InstanceFileError:
        return InstanceFileError(path, error.lineno, f"not valid JSON ({error.msg} at column {error.colno})")

    position = _skip_space(text, 0)
    if position < len(text) and text[position] == "{":
        try:
            value, _ = decoder.raw_decode(text, position)
        except json.JSONDecodeError as error:
            raise fail(error) from None
        yield line_of(position), value
        return
    if position >= len(text) or text[position] != "[":
        raise InstanceFileError(path, line_of(position), "expected a JSON array of instance objects")
    position = _skip_space(text, position + 1)
    if position < len(text) and text[position] == "]":
        return
    while True:
        try:
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as error:
            raise fail(error) from None
        yield line_of(position), value
        position = _skip_space(text, end)
        if position < len(text) and text[position] == ",":
            position = _skip_space(text, position + 1)
            continue
        if position < len(text) and text[position] == "]":
            if text[position + 1 :].strip():
                raise InstanceFileError(path, line_of(position + 1), "unexpected text after the JSON array")
            return
        raise InstanceFileError(path, line_of(position), "expected ',' or ']' in the JSON array")


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def _test_list(path: Path, line: int, row: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = row.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError:
            raise InstanceFileError(
                path, line, "a string here must be a JSON-encoded list of test ids", key
            ) from None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InstanceFileError(path, line, "the JSON-encoded value must be a list of strings", key)
    return tuple(value)


def _check_per_test_ids(path: Path, line: int, fail_to_pass: tuple[str, ...], pass_to_pass: tuple[str, ...],
                        test_cmd: str | None) -> None:
    """Reject per-test rows that could never be graded: no FAIL_TO_PASS, or ids the default runner never reports."""
    if not fail_to_pass:
        raise InstanceFileError(
            path, line, "is empty and the row has no 'verify': any patch would resolve; give at least one "
            "test id, or a 'verify' command", "FAIL_TO_PASS")
    if test_cmd is not None:
        return
    for key, ids in (("FAIL_TO_PASS", fail_to_pass), ("PASS_TO_PASS", pass_to_pass)):
        bare = next((test_id for test_id in ids if "::" not in test_id), None)
        if bare is not None:
            raise InstanceFileError(
                path, line, f"{bare!r} is not a pytest node id ('path/to/test_file.py::name'), the only form the "
                "default pytest runner reports, so it could never match (even the gold patch would be "
                "unresolved); give a 'verify' command, or a 'test_cmd' whose report names tests this way", key)


def _schema_error(path: Path, line: int, row: Any) -> InstanceFileError | None:
    import jsonschema

    errors = list(_validator().iter_errors(row))
    if not errors:
        return None
    error = jsonschema.exceptions.best_match(errors)
    if error.validator == "anyOf" and not error.absolute_path:
        return InstanceFileError(path, line, "needs a 'verify' command or a 'FAIL_TO_PASS' list", "verify")
    if error.validator == "required":
        missing = error.message.split("'")[1]
        return InstanceFileError(path, line, "is required but missing", missing)
    field_path = ".".join(str(part) for part in error.absolute_path) or None
    top = str(error.absolute_path[0]) if error.absolute_path else None
    described = _validator().schema["properties"].get(top, {}).get("description") if top else None
    accepted = f"; expected {described}" if described else ""
    if error.validator == "not":
        message = f"{error.instance!r} is not allowed"
    else:
        message = error.message
    return InstanceFileError(path, line, f"{message}{accepted}", field_path)


def env_problem(spec: Mapping[str, Any]) -> str | None:
    """What is wrong with an ``env`` table (from a row or --arena-env-specs), or None."""
    import jsonschema

    env_schema = _validator().schema["properties"]["env"]
    errors = list(jsonschema.Draft202012Validator(env_schema).iter_errors(spec))
    if not errors:
        return None
    error = jsonschema.exceptions.best_match(errors)
    where = ".".join(str(part) for part in error.absolute_path)
    return f"field {where!r}: {error.message}; expected {env_schema['description']}" if where else (
        f"{error.message}; expected {env_schema['description']}")


def with_env_spec(instance: Instance, specs: Mapping[tuple[str, str], Mapping[str, Any]]) -> Instance:
    """The instance with the env spec for its repo and ``version``, unless its row has its own ``env``."""
    if instance.env is not None:
        return instance
    spec = specs.get((instance.repo, str(instance.row.get("version", ""))))
    return replace(instance, env=dict(spec)) if spec is not None else instance


def resolve_source(path: Path, line: int, row: Mapping[str, Any], repos_dir: Path | None) -> Source:
    """Turn the row's ``source`` (or its ``repo`` under ``repos_dir``) into an absolute location."""
    source = row.get("source")
    if source:
        kind, location = next(iter(source.items()))
        if kind == "bundle":
            bundle = (path.parent / location).resolve()
            if not bundle.is_file():
                raise InstanceFileError(path, line, f"bundle {location!r} not found at {bundle}", "source.bundle")
            return Source("bundle", str(bundle))
        if kind == "git":
            if "://" in location or re.match(r"^[\w.-]+@[\w.-]+:", location):
                return Source("git", location)
            repo_path = (path.parent / location).resolve()
            if not repo_path.exists():
                raise InstanceFileError(path, line, f"repository {location!r} not found at {repo_path}", "source.git")
            return Source("git", str(repo_path))
        return Source(kind, location)
    repo = str(row["repo"])
    if repos_dir is None:
        raise InstanceFileError(
            path, line, "has no 'source', so the repository is looked up by 'repo' under "
            "--arena-repos DIR; give --arena-repos or a 'source'", "repo",
        )
    owner, name = repo.split("/", 1)
    candidates = [repos_dir / f"{owner}__{name}", repos_dir / owner / name]
    candidates += [c.with_name(c.name + ".git") for c in list(candidates)]
    for candidate in candidates:
        if candidate.exists():
            return Source("git", str(candidate.resolve()))
    looked = ", ".join(str(c) for c in candidates[:2])
    raise InstanceFileError(
        path, line, f"repository {repo!r} not found under --arena-repos (looked for {looked})", "repo"
    )


def build_instance(path: Path, line: int, row: Any, repos_dir: Path | None) -> Instance:
    """Validate one row and build its ``Instance``; raise ``InstanceFileError`` if it is bad."""
    if not isinstance(row, dict):
        raise InstanceFileError(path, line, f"expected a JSON object, got {type(row).__name__}")
    error = _schema_error(path, line, row)
    if error:
        raise error
    env = row.get("env")
    fail_to_pass = _test_list(path, line, row, "FAIL_TO_PASS")
    pass_to_pass = _test_list(path, line, row, "PASS_TO_PASS")
    if not row.get("verify"):
        _check_per_test_ids(path, line, fail_to_pass, pass_to_pass, row.get("test_cmd"))
    return Instance(
        instance_id=row["instance_id"],
        repo=row["repo"],
        base_commit=row["base_commit"],
        problem_statement=row["problem_statement"],
        source=resolve_source(path, line, row, repos_dir),
        patch=row.get("patch") or None,
        test_patch=row.get("test_patch") or None,
        verify=row.get("verify"),
        test_cmd=row.get("test_cmd"),
        fail_to_pass=fail_to_pass,
        pass_to_pass=pass_to_pass,
        env=dict(env) if env else None,
        marks=tuple(row.get("marks") or ()),
        row=row,
        path=path,
        line=line,
    )


def load_instances(path: Path, rows: list[tuple[int, Any]], repos_dir: Path | None) -> list[Instance]:
    """Validate rows from one file, reject duplicates, and return them sorted by id."""
    seen: dict[str, int] = {}
    instances = []
    for line, row in rows:
        instance = build_instance(path, line, row, repos_dir)
        first = seen.setdefault(instance.instance_id, line)
        if first != line:
            raise InstanceFileError(
                path, line, f"duplicate {instance.instance_id!r} (first defined on line {first})", "instance_id"
            )
        instances.append(instance)
    return sorted(instances, key=lambda i: i.instance_id)
