"""A cell's isolation machinery: its environment, sandbox, processes, git workspace, patches and Python environments.

Below grading, arms and the worker's pipeline; imports none of them."""
