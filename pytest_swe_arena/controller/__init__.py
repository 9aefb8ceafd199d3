"""The controller: the one process that owns the out dir.

It schedules cells (``scheduling``), turns the reports that end them into ledger rows (``records``,
``recorder``; stand-ins for cells that never reported in ``stand_ins``), counts spend against the
budgets, shows progress (``progress``, ``terminal``) and starts the workers (``workers``). It reads
only the JSON the worker side sends; the ledger's format is ``ledger/``'s.
"""
