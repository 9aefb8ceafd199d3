"""The ledger's format: the writer, the hash chain, the out dir's lock and the readers.

Below the controller, results and the CLI; imports none of them."""
