"""What a cell spent: the usage record (``usage``), prices, the plausibility checks, the budgets (``budget``)
and the metering proxy (``meter``). Each agent's own usage files are read in ``agents/``."""
