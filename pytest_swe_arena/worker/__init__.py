"""The worker's side of pytest: collecting an instance file into cells (``collection``), the cell's
fixtures (``fixtures``), the per-session plugin (``session``) and the cell pipeline (``pipeline``: the
environment and its health check, the arm, the spend, the patch, the grade). Stands on ``cell/``,
``grading/`` and ``arms/``."""
