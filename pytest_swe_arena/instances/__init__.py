"""Instances: the model, reading instance files, and the Python environments they name.

- ``model``: ``Instance``, ``Source``, ``InstanceFileError``;
- ``loading``: JSON Lines and JSON array files, validated against ``schemas/instance.schema.json``;
- ``formats``: datasets as published (SWE-bench 5 rows and task directories, SWE-rebench, SWE-smith), each
  row's format read from its columns and turned into the harness's row;
- ``selection``: the marks from ``created_at``, difficulty and language, and the ``created_at`` window;
- ``specs``: the ``--arena-env-specs`` file (an ``env`` per repo and version);
- ``swebench_specs``: the env specs shipped for SWE-bench's repositories (``worker.collection`` loads
  them, ``worker.swebench_envs`` finishes one for a row).
"""
