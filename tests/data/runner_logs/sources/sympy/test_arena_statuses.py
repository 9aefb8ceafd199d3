"""Results bin/test reports that SWE-bench Lite's own files rarely show (a real run, for the parser corpus)."""
from sympy.testing.pytest import XFAIL, SKIP, skip, slow


def test_passes():
    assert True


@XFAIL
def test_expected_to_fail_and_does():
    assert False


@XFAIL
def test_expected_to_fail_but_passes():
    assert True


@slow
def test_slow_is_not_run_without_slow():
    assert True


def test_skipped_with_a_reason():
    skip("no plotting backend")


@SKIP("decorated skip")
def test_skipped_by_decorator():
    assert True


def test_prints_before_its_result():
    print("some output, with a path sympy/core/basic.py:12 in it ")
    assert True


def test_fails():
    assert 1 == 2


def test_raises():
    raise ValueError("not a number")


def test_last_in_file():
    assert True
