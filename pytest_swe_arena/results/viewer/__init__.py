"""The results viewer: an overview of a run and a page per cell, in ``<out>/viewer/``.

``write_viewer`` builds it (the sweep and ``swe-arena report`` call it after ``summary.json``);
``swe-arena view OUT`` serves the out dir on 127.0.0.1 (``serve``), though the pages work from
``file://`` too. The pages' scripts, styles and vendored libraries are in ``assets/``.
"""

from __future__ import annotations

from .build import write_viewer

__all__ = ["write_viewer"]
