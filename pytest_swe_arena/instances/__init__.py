"""Instances: the model, reading instance files, and the Python environments they name.

- ``model``: ``Instance``, ``Source``, ``InstanceFileError``;
- ``loading``: JSON Lines and JSON array files, validated against ``schemas/instance.schema.json``;
- ``specs``: the ``--arena-env-specs`` file (an ``env`` per repo and version);
- ``swebench_specs``: the env specs shipped for SWE-bench's repositories (``worker.collection`` loads
  them, ``worker.swebench_envs`` finishes one for a row).
"""
