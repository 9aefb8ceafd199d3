"""Arm kinds, one module each: ``reference`` (GOLD, EMPTY), ``replay``, ``opencode``, ``command``, ``supervisor``.

``base`` holds the protocol every kind implements, ``agent`` what agent kinds share, and
``kinds`` finds the kinds and builds a sweep's arms.
"""
