"""The metering proxy's cost: latency added per model call, throughput, and memory with many streams, vs direct calls.

    python bench/meter.py                        # 400 calls per latency sample set, 2,000 for throughput
    python bench/meter.py --calls 20 --throughput-calls 40 --streams 4   # smoke size

The upstream is the scripted endpoint (pytest_swe_arena/mockmodel, `swe-arena mock-model`) in its
own process; the meter is the harness's own proxy process
(``spend.meter.process.MeterProcess``, as a sweep's controller starts it), with a
cell route open. Every figure is the same calls made directly to the endpoint
and through the cell's route, in the same run, interleaved:

* latency: sequential chat calls (JSON reply, and an SSE stream with usage),
  the best of each (as bench/README.md takes single operations: the cost
  without interference; the medians are in the notes); the difference is what
  the proxy adds per call (target: under 2 ms);
* throughput: ``--threads`` clients calling at once, calls per second
  (target: 500 calls/s through the meter);
* memory: the proxy's peak resident set (``VmHWM``) while ``--streams`` agents
  stream at once (slow replies, so they overlap), against its resident set
  idle with the route open.

The endpoint is single-process Python: when it is the bottleneck, both sides
of the throughput ratio are held to its speed (the notes print its direct rate).
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import benchlib
from benchlib import Figure

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from helpers.scripted_model import ScriptedModelProcess  # noqa: E402

from pytest_swe_arena.spend.meter.accounts import Upstream  # noqa: E402
from pytest_swe_arena.spend.meter.process import MeterProcess  # noqa: E402

USAGE = {"prompt_tokens": 1200, "completion_tokens": 80, "cached_tokens": 500}
PRICE = {"input": 3.0, "output": 15.0, "cache_read": 0.3}
PRICES = {"scripted-model": PRICE, "slow-model": PRICE}


def chat(base_url: str, stream: bool) -> float:
    """One chat call, read to its end; its wall seconds."""
    parts = urlsplit(base_url)
    body = {"model": "scripted-model", "messages": [{"role": "user", "content": "go"}], "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    clock = time.perf_counter()
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=120)
    try:
        connection.request("POST", parts.path + "/chat/completions", json.dumps(body),
                           {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"})
        reply = connection.getresponse()
        reply.read()
        if reply.status != 200:
            raise SystemExit(f"bench: {base_url} answered HTTP {reply.status}")
    finally:
        connection.close()
    return time.perf_counter() - clock


def latencies(direct: str, metered: str, calls: int, stream: bool) -> tuple[list[float], list[float]]:
    """Seconds per call, direct and metered, sampled alternately so load falls on both alike."""
    samples: dict[str, list[float]] = {direct: [], metered: []}
    for _ in range(calls):
        for url in (direct, metered):
            samples[url].append(chat(url, stream))
    return samples[direct], samples[metered]


def throughput(url: str, calls: int, threads: int) -> float:
    """Calls per second with ``threads`` clients at once."""
    with ThreadPoolExecutor(threads) as pool:
        clock = time.perf_counter()
        list(pool.map(lambda _: chat(url, False), range(calls)))
        return calls / (time.perf_counter() - clock)


def resident_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise SystemExit(f"bench: no {field} in /proc/{pid}/status")


def main() -> None:
    parser = benchlib.parser(__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="sequential calls per latency sample set")
    parser.add_argument("--throughput-calls", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--streams", type=int, default=32, help="agents streaming at once for the memory figure")
    args = parser.parse_args()
    turn = {"content": "done " * 40, "usage": USAGE}
    slow = {"content": "done " * 40, "usage": USAGE, "mode": "slow", "delay": 0.5, "chunk_delay": 0.01}
    with benchlib.scratch(args, "bench-meter-") as root:
        endpoint = ScriptedModelProcess({"fallback": turn, "by_model": {"slow-model": [slow] * args.streams}},
                                        root / "endpoint").start()
        meter = MeterProcess(root / "meter", PRICES)
        try:
            client = meter.start()
            direct = f"http://127.0.0.1:{endpoint.port}/v1"
            route = client.open_cell("bench", "BENCH", [Upstream("up", direct)])
            metered = route.base_url("up")
            for url in (direct, metered):  # warm both paths (connections, aiohttp's first request)
                chat(url, False)
            json_direct, json_metered = latencies(direct, metered, args.calls, stream=False)
            sse_direct, sse_metered = latencies(direct, metered, args.calls, stream=True)
            rate_direct = throughput(direct, args.throughput_calls, args.threads)
            rate_metered = throughput(metered, args.throughput_calls, args.threads)
            assert meter.process is not None
            idle = resident_kib(meter.process.pid, "VmRSS")
            stream_body = {"model": "slow-model", "messages": [], "stream": True,
                           "stream_options": {"include_usage": True}}
            parts = urlsplit(metered)

            def slow_stream(_: int) -> None:
                connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=300)
                connection.request("POST", parts.path + "/chat/completions", json.dumps(stream_body),
                                   {"Content-Type": "application/json"})
                connection.getresponse().read()
                connection.close()

            with ThreadPoolExecutor(args.streams) as pool:
                list(pool.map(slow_stream, range(args.streams)))
            peak = resident_kib(meter.process.pid, "VmHWM")
            state = client.close_cell(route)
        finally:
            meter.stop()
            endpoint.stop()
    expected = 2 + 2 * args.calls + args.throughput_calls + args.streams - 1
    if state.usage.steps != expected or state.calls_unknown:
        raise SystemExit(f"bench: the meter counted {state.usage.steps} calls ({state.calls_unknown} unknown), "
                         f"expected {expected}")
    best = {name: min(samples) * 1000 for name, samples in
            (("json direct", json_direct), ("json", json_metered), ("sse direct", sse_direct), ("sse", sse_metered))}
    median = {name: statistics.median(samples) * 1000 for name, samples in
              (("json direct", json_direct), ("json", json_metered), ("sse direct", sse_direct), ("sse", sse_metered))}
    added_json, added_sse = best["json"] - best["json direct"], best["sse"] - best["sse direct"]
    figures = [
        Figure("JSON call through the meter", best["json"], "ms", "the same call direct", best["json direct"]),
        Figure("SSE call through the meter", best["sse"], "ms", "the same call direct", best["sse direct"]),
        Figure(f"calls/s through the meter, {args.threads} clients", rate_metered, "calls/s", "direct",
               rate_direct, ">= 500 calls/s"),
        Figure(f"meter peak RSS, {args.streams} streams at once", peak / 1024, "MiB", "meter idle RSS", idle / 1024),
    ]
    notes = [
        f"added per call (best of {args.calls}): JSON {added_json:+.2f} ms, SSE {added_sse:+.2f} ms "
        f"(target < 2 ms: {'met' if max(added_json, added_sse) < 2 else 'MISSED'})",
        f"medians: JSON {median['json']:.2f} ms vs {median['json direct']:.2f} ms direct, "
        f"SSE {median['sse']:.2f} ms vs {median['sse direct']:.2f} ms direct",
        f"the endpoint's own rate, direct: {rate_direct:.0f} calls/s (a ceiling for both sides)",
        f"every call counted: {state.usage.steps} calls, {state.usage.total_tokens:,} tokens, "
        f"${state.usage.cost_usd:.4f}",
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
    ]
    benchlib.report("metering proxy (spend.meter) vs direct calls to the scripted endpoint", figures, args, notes)


if __name__ == "__main__":
    main()
