"""Grading a patch: which tests run (``runners``), where (``tree``, ``shared``, ``verify``), how a test's
status is read from its report (``parsers``) and checked (``witnesses``), the verdict under the rule set (``rules``),
and the checks of a patch's integrity (``integrity``). Stands on ``cell/``; knows no arm."""
