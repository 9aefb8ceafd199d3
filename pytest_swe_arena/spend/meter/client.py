"""The harness's API to a metering proxy in another process (``python -m pytest_swe_arena.spend.meter``).

``MeterClient`` has the methods of ``MeterProxy`` that a cell needs, spoken
over the proxy's control API with its secret. Standard library only.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any, Protocol

from ..budget import Limit, SpendCap
from ..usage import Usage
from .accounts import NO_CAP, NO_LIMIT, CellRoute, CellState, MeterError, MeterTotals, Upstream

SECRET_HEADER = "X-Arena-Meter-Secret"
#: the variable a meter process reads its control secret from
SECRET_VARIABLE = "ARENA_METER_SECRET"


def proxy_url(host: str, port: int) -> str:
    """A proxy's root, ``http://HOST:PORT`` (an IPv6 address in brackets)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class CellMeter(Protocol):
    """What the harness uses to meter cells: ``MeterProxy`` in its own process, ``MeterClient`` from another."""

    def open_cell(self, cell_key: str, arm: str, upstreams: Iterable[Upstream], cap: SpendCap = ...,
                  budget: Limit = ...) -> CellRoute: ...

    def cell_state(self, route: CellRoute) -> CellState: ...

    def close_cell(self, route: CellRoute, drain_seconds: float = ...) -> CellState: ...

    def totals(self) -> MeterTotals: ...

    def count_outside(self, arm: str, usage: Usage) -> None: ...


class MeterClient:
    """A proxy's control API at ``url`` (``http://127.0.0.1:PORT``, or the address it listens on), with its secret."""

    def __init__(self, url: str, secret: str, timeout: float = 120.0):
        self.url = url.rstrip("/")
        self.secret = secret
        self.timeout = timeout

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}/_meter/{path}", data=data, method=method,
                                         headers={SECRET_HEADER: self.secret, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as error:
            try:
                message = json.loads(error.read())["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = f"HTTP {error.code}"
            raise MeterError(f"the metering proxy at {self.url} refused {method} {path}: {message}") from None
        except (OSError, ValueError) as error:
            raise MeterError(f"cannot reach the metering proxy at {self.url}: {error}") from None

    def open_cell(self, cell_key: str, arm: str, upstreams: Iterable[Upstream], cap: SpendCap = NO_CAP,
                  budget: Limit = NO_LIMIT) -> CellRoute:
        return CellRoute.from_json(self._call("POST", "cells", {
            "cell_key": cell_key, "arm": arm, "upstreams": {upstream.name: upstream.url for upstream in upstreams},
            "cap": asdict(cap), "budget": asdict(budget)}))

    def cell_state(self, route: CellRoute) -> CellState:
        return CellState.from_json(self._call("GET", f"cells/{route.token}"))

    def close_cell(self, route: CellRoute, drain_seconds: float = 30.0) -> CellState:
        return CellState.from_json(self._call("POST", f"cells/{route.token}/close",
                                              {"drain_seconds": drain_seconds}))

    def totals(self) -> MeterTotals:
        return MeterTotals.from_json(self._call("GET", "totals"))

    def count_outside(self, arm: str, usage: Usage) -> None:
        self._call("POST", "outside", {"arm": arm, "usage": usage.to_json()})
