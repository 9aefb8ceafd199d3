"""A conftest that changes pytest's exit status after the summary: the log shows only passes."""


def pytest_sessionfinish(session):
    session.exitstatus = 1
