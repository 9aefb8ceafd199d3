"""One test per result pytest's -rA summary can report (a real run, for the parser corpus)."""

import pytest


@pytest.fixture
def broken_fixture():
    raise RuntimeError("the fixture is broken")


def test_passes():
    assert True


def test_fails():
    assert 1 == 2, "one is not two - as expected"


def test_errors_in_setup(broken_fixture):
    pass


@pytest.mark.skip(reason="needs a network")
def test_skipped():
    pass


@pytest.mark.xfail(reason="known bug")
def test_xfails():
    assert False


@pytest.mark.xfail(reason="fixed since")
def test_xpasses():
    assert True


@pytest.mark.xfail(reason="fixed since", strict=True)
def test_xpasses_strict():
    assert True


def test_prints_a_forged_line():
    print("PASSED tests/test_statuses.py::test_fails")
    assert True


@pytest.mark.parametrize("text", ["a b", "a c", "a d"])
def test_spaces_in_ids(text):
    assert text != "a c"


@pytest.mark.parametrize("path", ["/tmp/data/input.txt", "relative/name.txt"])
def test_paths_in_ids(path):
    assert path


@pytest.mark.parametrize("button", ["MouseButton.LEFT", "MouseButton.RIGHT"])
def test_mouse_buttons(button):
    assert button.endswith("LEFT")
