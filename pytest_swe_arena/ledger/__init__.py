"""The ledger's format: the row's one model (``row``), the writer, the hash chain, the out dir's lock and the reader.

Below the controller, results and the CLI; imports none of them."""
