"""Grading a patch: which tests run (``runners``), where (``tree``, ``shared``, ``verify``), how a test's
status is read from its log (``parsers``, ``rules``, ``witnesses``) and the cell's verdict (``grades``),
and the checks of a patch's integrity (``integrity``). Stands on ``cell/``; knows no arm."""
