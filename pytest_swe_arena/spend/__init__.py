"""What a cell spent: the usage record (``usage``), prices, the readers of each agent's own usage files,
the plausibility checks, the budgets (``budget``) and the metering proxy (``meter``)."""
