"""What a sweep's ledger says: the summary, the report (``html``, ``text``), comparisons, statistics,
calibration, forecasts, the gate, and the viewer. Reads the ledger through ``ledger/``; runs no cell."""
