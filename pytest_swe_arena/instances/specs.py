"""Python environments for instances without their own ``env``: the ``--arena-env-specs`` file.

The file maps a repository and version to an environment (``[specs."owner/name"."VERSION"]``
with python, requirements, pre_install, install), as SWE-bench rows need: they name a
``version`` but carry no environment. ``with_env_spec`` gives each instance its spec; an
``env`` table, a row's or a spec's, is checked against the instance schema (``env_problem``).
The specs shipped for SWE-bench are in ``swebench_specs``.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from .loading import instance_schema
from .model import Instance
from .swebench_specs import ShippedSpecs


class EnvSpecsError(Exception):
    """The ``--arena-env-specs`` file is unreadable or malformed; the message names file and table."""


def load_env_specs(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Read ``[specs."owner/name"."VERSION"]`` tables; raise ``EnvSpecsError`` naming what is wrong."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise EnvSpecsError(f"{path}: cannot read TOML: {error}") from None
    specs = data.get("specs")
    if not isinstance(specs, dict) or not specs:
        raise EnvSpecsError(f'{path}: expected tables [specs."owner/name"."VERSION"] with python, requirements, '
                            "pre_install, install")
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for repo, versions in specs.items():
        if "/" not in repo or not isinstance(versions, dict):
            raise EnvSpecsError(f'{path}: [specs."{repo}"] must be a repo "owner/name" holding one table per version')
        for version, spec in versions.items():
            where = f'{path}: [specs."{repo}"."{version}"]'
            if not isinstance(spec, dict):
                raise EnvSpecsError(f"{where} must be a table")
            problem = env_problem(spec)
            if problem:
                raise EnvSpecsError(f"{where}: {problem}")
            found[(repo, str(version))] = spec
    return found


@functools.cache
def _env_validator() -> Any:
    import jsonschema

    return jsonschema.Draft202012Validator(instance_schema()["properties"]["env"])


def env_problem(spec: Mapping[str, Any]) -> str | None:
    """What is wrong with an ``env`` table (from a row or --arena-env-specs), or None."""
    import jsonschema

    env_schema = instance_schema()["properties"]["env"]
    errors = list(_env_validator().iter_errors(spec))
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


def with_shipped_spec(instance: Instance, shipped: ShippedSpecs) -> Instance:
    """The instance with SWE-bench's shipped spec for its repo and ``version``, unless it has an ``env``.

    Runs after ``with_env_spec``, so a row's own ``env`` and ``--arena-env-specs`` both come first. An image
    instance brings its environment with it.
    """
    if instance.env is not None or instance.source.kind == "image" or not isinstance(instance.row.get("version"), str):
        return instance
    version = instance.row.get("version")
    spec = shipped.get(instance.repo, version) if isinstance(version, str) else None
    if spec is None:
        return instance
    return replace(instance, env=dict(spec.env), shipped_spec=spec)
