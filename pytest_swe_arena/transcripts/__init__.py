"""An agent's own record of a cell, read on both sides: as a conversation (``readers``), as ATIF (``atif``).

Neither side's: the worker writes each cell's ``trajectory.atif.json`` after its arm, the viewer shows
the conversation, and ``swe-arena export`` bundles the ATIF files. Everything here reads the run dir, a
cell's hostile output, through ``crossing`` or through a reader its caller gives.
"""
