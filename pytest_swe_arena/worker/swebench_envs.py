"""A shipped SWE-bench spec, finished for one row: its repository's requirement files, and its date.

``instances.swebench_specs`` holds the specs and the rules (what a date is, how files are read);
this module applies them to a row with the repository's mirror at hand (the row's
``environment_setup_commit`` is read from the mirror: a workspace holds no later commit), giving
the ``EnvSpec`` that ``venvs`` builds.
"""

from __future__ import annotations

from pathlib import Path

from ..cell.git import run_git
from ..cell.venvs import EnvBuildError, EnvSpec
from ..instances.model import Instance
from ..instances.swebench_specs import (
    ShippedSpec,
    build_constraints,
    git_commit_date,
    load_shipped_specs,
    override_requirements,
    requirements_from_environment_file,
    requirements_from_files,
    resolution_date,
    row_date,
)
from .health import unreachable_server


def shipped_env_spec(instance: Instance, spec: ShippedSpec, mirror: Path | None) -> EnvSpec:
    """The environment SWE-bench builds for ``instance``, resolved as of its date; ``EnvBuildError`` if it cannot be.

    :param mirror: the repository's mirror (bare), where ``environment_setup_commit`` is read; None for a
        source without one (the row's ``created_at`` dates it, and requirement files cannot be read).
    """
    where = f"shipped spec {spec.repo} {spec.version}"
    if spec.conda_only:
        raise EnvBuildError(f"{where} cannot be reproduced without conda: {spec.conda_only}")
    unreachable = unreachable_server(spec.network)
    if unreachable:
        raise EnvBuildError(f"{where}: its tests need the network (field 'network': {', '.join(spec.network)}), "
                            f"which this machine cannot reach: {unreachable}")
    setup_commit = instance.row.get("environment_setup_commit")
    as_of = resolution_date(row_date(instance.row, lambda commit: git_commit_date(mirror, commit) if mirror else None),
                            spec.python, spec.date_floor)

    def read(path: str) -> str | None:
        if mirror is None or not isinstance(setup_commit, str):
            return None
        shown = run_git("show", f"{setup_commit}:{path}", cwd=mirror)
        return shown.stdout.decode("utf-8", errors="replace") if shown.returncode == 0 else None

    own = list(spec.env.get("requirements") or ())
    requirements: list[str] = own
    overrides: tuple[str, ...] = ()
    if spec.requirements_files:
        found = requirements_from_files(read, spec.requirements_files)
        if found is None:
            raise EnvBuildError(f"{where}: none of {', '.join(spec.requirements_files)} at the row's "
                                f"environment_setup_commit {setup_commit!r} (SWE-bench installs the first found)")
        requirements, overrides = [*found, *own], override_requirements(own)
    if spec.environment_files:
        text = next((text for text in map(read, spec.environment_files) if text is not None), None)
        if text is None:
            raise EnvBuildError(f"{where}: none of {', '.join(spec.environment_files)} at the row's "
                                f"environment_setup_commit {setup_commit!r}")
        translated = requirements_from_environment_file(text, load_shipped_specs().conda)
        requirements, overrides = [*translated.requirements, *own], override_requirements(own)
    return EnvSpec(
        python=spec.python,
        requirements=tuple(requirements),
        pre_install=tuple(spec.env.get("pre_install") or ()),
        install=spec.env.get("install") or None,
        as_of=as_of,
        overrides=tuple(overrides),
        build_constraints=build_constraints(own),
        variables=dict(spec.eval_env),
    )
