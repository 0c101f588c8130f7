"""What the proxy costs on the replies it relays: the same replies fetched directly from the upstream
and through ``edgewise serve --upstream``, side by side in one run, with the proxy's memory.

The upstream is the loopback fake of ``tests/proxy_upstream.py`` in a process of its own; it makes
each reply on the fly (never held whole). For each reply size and number of concurrent clients,
three ways are timed, interleaved repetition by repetition:

- ``direct``: ``GET {upstream}/v1/blobs/SIZE`` from the fake itself;
- ``forwarded``: the same path through the proxy (the passthrough);
- ``chat``: ``POST /v1/chat/completions`` through the proxy, a non-streamed JSON reply of SIZE bytes.

Reported: the median wall time of the clients' reads (each client, with an ``httpx.Client`` made
before the clock starts, opens a connection and reads its whole reply), the
throughput in MB/s of all clients together, the ratio to ``direct``, and the proxy's resident
memory growth at its peak (``/proc``, sampled every 20 ms) over its memory before the repetition.
Then the latency of a small forwarded request (``GET /v1/models``, sequential), direct and through
the proxy, medians. Everything is on 127.0.0.1; the clients, the fake and the proxy share the
machine's cores, so the ratios are what to read, not the absolute numbers.

    .venv/bin/python benchmarks/proxy_relay.py [--sizes-mb 1,100] [--clients 1,4] [--reps 3] [--small 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.proxy_upstream import rss_mb, start_proxy  # noqa: E402
from tests.servers import free_port, start, stop  # noqa: E402

MB = 1024 * 1024
FAKE = "import sys\nfrom tests.proxy_upstream import FakeOpenAI\nFakeOpenAI(int(sys.argv[1])).serve_forever()\n"
HEADER = ("reply", "clients", "way", "median s", "MB/s", "time / direct", "proxy RSS growth MB (max)")


def fetch(client: httpx.Client, way: str, direct: str, proxy: str, size: int) -> int:
    if way == "chat":
        body = {"model": f"big-{size}", "messages": [{"role": "user", "content": "x"}]}
        request = ("POST", proxy + "/v1/chat/completions", body)
    else:
        request = ("GET", (direct if way == "direct" else proxy) + f"/v1/blobs/{size}", None)
    n = 0
    with client.stream(request[0], request[1], json=request[2]) as r:
        for piece in r.iter_raw():
            n += len(piece)
    if n != size or r.status_code != 200:
        raise RuntimeError(f"{way}: got {r.status_code} and {n} bytes, not {size}")
    return n


def run_once(way: str, direct: str, proxy: str, size: int, clients: int, pid: int) -> tuple[float, float]:
    """(seconds for all clients to read their replies, the proxy's peak RSS growth in MB)."""
    before, peak, done = rss_mb(pid), [0.0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak.append(rss_mb(pid) - before)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    pool = [httpx.Client(timeout=300) for _ in range(clients)]  # made before the clock starts (TLS setup is slow)
    threads = [threading.Thread(target=fetch, args=(c, way, direct, proxy, size)) for c in pool]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    done.set()
    sampler.join()
    for c in pool:
        c.close()
    return seconds, max(peak)


def small_latency(url: str, n: int) -> float:
    times = []
    with httpx.Client(timeout=30) as c:
        for _ in range(n):
            t0 = time.perf_counter()
            c.get(url).raise_for_status()
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def table(rows: list[tuple]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def measure(direct: str, proxy: str, pid: int, sizes: list[int], clients: list[int], reps: int) -> list[tuple]:
    rows = []
    ways = ("direct", "forwarded", "chat")
    for size in sizes:
        for c in clients:
            got: dict[str, list[tuple[float, float]]] = {w: [] for w in ways}
            for _ in range(reps):  # interleaved: each repetition runs every way once
                for way in ways:
                    got[way].append(run_once(way, direct, proxy, size, c, pid))
            base = statistics.median(s for s, _ in got["direct"])
            for way in ways:
                secs = statistics.median(s for s, _ in got[way])
                growth = "" if way == "direct" else f"{max(g for _, g in got[way]):.0f}"
                rows.append((f"{size / MB:g} MB", c, way, f"{secs:.3f}", f"{size * c / MB / secs:.0f}",
                             f"{secs / base:.2f}x", growth))
    return rows


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes-mb", default="1,100")
    p.add_argument("--clients", default="1,4")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--small", type=int, default=200, help="small requests for the latency row")
    a = p.parse_args(argv)
    sizes = [int(float(x) * MB) for x in a.sizes_mb.split(",")]
    clients = [int(x) for x in a.clients.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="proxy-relay-"))
    port = free_port()
    fake = start([sys.executable, "-c", FAKE, str(port)], f"http://127.0.0.1:{port}/v1/models", tmp / "fake.log",
                 env={"PYTHONPATH": str(ROOT)})
    direct = f"http://127.0.0.1:{port}"
    proc, proxy = start_proxy(tmp, direct + "/v1", "--upstream-timeout", "300")
    try:
        small_latency(proxy + "/v1/models", 5)  # warm
        start_rss = rss_mb(proc.pid)
        rows = measure(direct, proxy, proc.pid, sizes, clients, a.reps)
        lat = {"direct": [], "proxy": []}
        for _ in range(3):
            lat["direct"].append(small_latency(direct + "/v1/models", a.small))
            lat["proxy"].append(small_latency(proxy + "/v1/models", a.small))
    finally:
        stop(proc)
        stop(fake)
    print(f"edgewise serve --upstream (1 worker) relaying replies made on the fly by a loopback fake; "
          f"{a.reps} interleaved repetitions, medians; proxy RSS at start {start_rss:.0f} MB\n")
    print(table(rows))
    d, v = statistics.median(lat["direct"]), statistics.median(lat["proxy"])
    print(f"\nGET /v1/models, {a.small} sequential requests x 3: direct {d:.2f} ms, through the proxy {v:.2f} ms "
          f"(median; +{v - d:.2f} ms)")
    return {"rows": rows, "latency": (d, v)}


if __name__ == "__main__":
    main()
