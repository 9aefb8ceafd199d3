"""Image-backed rows have the same witnesses as the others (issue 27): podman carries the witness's pipe into the
container (``--preserve-fds``), the plugin's folder is shown read-only, the start-up rules are the container's
environment. Real podman, a real image (``helpers.testbed_image``), the verdict attacks of
``data/hostile/verdict_writers.py`` as the patch, graded in place in the image as an image row's cell is.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from helpers.gitrepos import CALC_FIX, diff_of

from pytest_swe_arena.cell.workspace import RepoStore, materialize
from pytest_swe_arena.grading.verify import ContainerHost, run_verify
from pytest_swe_arena.instances.loading import build_instance

sys.path.insert(0, str(Path(__file__).parents[1] / "data" / "hostile"))
from verdict_writers import ATTACKS, MODES, TESTS  # noqa: E402


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    from helpers.testbed_image import calc_testbed_image

    for engine, tag, project in calc_testbed_image(tmp_path_factory, "witness"):
        if not ContainerHost(engine, tag).carries_fds:
            pytest.skip(f"{engine} cannot pass a descriptor into a container: the witness needs podman")
        yield engine, tag, project


def graded_in_image(image, root: Path, mode: str, files: dict[str, str | None]):
    engine, tag, project = image
    row = project.row(FAIL_TO_PASS=TESTS[:1], PASS_TO_PASS=TESTS[1:], source={"image": tag}, **MODES[mode])
    if "verify" not in MODES[mode]:
        del row["verify"]
    instance = build_instance(root / "i.jsonl", 1, row, None)
    workspace = materialize(instance, RepoStore(root / "cache"), root / "testbed", engine=engine)
    patch = diff_of(project.repo, files).encode()
    verdict = run_verify(workspace, instance, patch, verify_on="patch", env=dict(os.environ),
                         log=root / "run" / "verify.log", timeout=300, host=ContainerHost(engine, tag))
    return verdict, [flag.kind for flag in verdict.integrity]


@pytest.mark.parametrize("mode", ["verify", "junit"])
def test_the_gold_patch_resolves_in_the_image_under_the_witnesses(image, tmp_path, mode):
    verdict, flags = graded_in_image(image, tmp_path, mode, dict(CALC_FIX))
    assert verdict.passed, (verdict.detail, (tmp_path / "run" / "verify.log").read_text())
    assert flags == []


@pytest.mark.parametrize(("attack", "mode"), [("junit_rewrite_at_exit", "junit"), ("exit_zero_at_exit", "verify"),
                                              ("exit_on_import", "verify"), ("gc_hook_wrapper", "junit")])
def test_an_attack_on_the_verdict_is_unresolved_in_the_image(image, tmp_path, attack, mode):
    """Each resolved an image row before (the run's exit status or its rewritten report was all there was)."""
    files, _ = ATTACKS[attack]
    verdict, flags = graded_in_image(image, tmp_path, mode, files)
    log = (tmp_path / "run" / "verify.log").read_text()
    assert not verdict.passed, (verdict.detail, log)
    assert "witnesses disagree" in verdict.detail and set(flags) & {"witness", "runner_tampered"}, (verdict.detail,
                                                                                                    flags, log)
