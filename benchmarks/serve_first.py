"""The first ``/v1/pack`` after ``edgewise serve`` starts, against the requests that follow it.

For each chunk count (default 20 and 200 chunks of ~150 cl100k tokens, budget 4,000) and each of
``--starts`` starts (default 5), the script starts ``edgewise serve --host 127.0.0.1`` (one worker)
from this checkout and, with ``--baseline-src DIR``, from another checkout's ``src`` too (the
alternative, e.g. before a change), one after the other; waits for ``/healthz``; then sends
``--requests`` (default 30) ``POST /v1/pack`` one at a time over a kept-alive connection, each
written whole at once (:class:`RawClient`). Every
request carries texts the server has not seen (NQ passage windows drawn with a seed of their own),
so each one counts its chunks afresh and the first differs from the others only by what the process
does once, and by the pause before it: the first request is sent ``--idle`` seconds (default 1)
after ``/healthz`` answered, and the last one ``--idle`` seconds after the one before it, so the
last shows what any request after such a pause costs in a warm process (CPU caches gone cold while
other jobs ran). Reported per server and chunk count: the server's own time (``duration_ms`` of
its access log) of the first request, of the last (after-idle), and the median of the others
between them, each the median over the starts, and their ratios; the worst first-request ratio
over the starts too.

    .venv/bin/python benchmarks/serve_first.py [--starts 5] [--requests 30] [--sizes 20,200]
        [--budget 4000] [--idle 1] [--data FILE|DIR] [--baseline-src DIR] [--tiny]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_load import Server, inputs  # noqa: E402

import edgewise  # noqa: E402
from edgewise.eval.data import data_path  # noqa: E402


class RawClient:
    """One kept-alive loopback connection that writes each request whole, in one ``sendall``: the
    server's time then holds no wait for a client still producing its body (an HTTP client's own
    first request is slower to send, and the server's clock runs from the headers)."""

    def __init__(self, url: str) -> None:
        host, port = url.rsplit("/", 1)[1].split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        self.sock.sendall(head + body)
        while b"\r\n\r\n" not in self.buf:
            self.buf += self._recv()
        top, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = top.decode("latin-1").split("\r\n")
        length = next(int(v) for k, _, v in (h.partition(":") for h in lines[1:]) if k.lower() == "content-length")
        while len(self.buf) < length:
            self.buf += self._recv()
        reply, self.buf = self.buf[:length], self.buf[length:]
        return int(lines[0].split()[1]), reply

    def _recv(self) -> bytes:
        data = self.sock.recv(1 << 16)
        if not data:
            raise SystemExit("the server closed the connection")
        return data

    def close(self) -> None:
        self.sock.close()


def one_start(server: Server, bodies: list[bytes], idle: float) -> list[float]:
    """The server's ms for each body, sent one at a time: the first ``idle`` s after /healthz answered,
    the last ``idle`` s after the one before it (a request after the same pause, in a warm process)."""
    client = RawClient(server.url)
    try:
        for i, body in enumerate(bodies):
            if i in (0, len(bodies) - 1):
                time.sleep(idle)
            status, reply = client.post("/v1/pack", body)
            if status != 200:
                raise SystemExit(f"{server.url} answered {status}: {reply[:300]!r}")
    finally:
        client.close()
    deadline = time.monotonic() + 10
    while True:  # the access log's last line is written once the reply has gone
        server.read = 0
        got = server.durations()
        if len(got) >= len(bodies) or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--requests", type=int, default=30)
    ap.add_argument("--sizes", default="20,200")
    ap.add_argument("--budget", type=int, default=4000)
    ap.add_argument("--idle", type=float, default=1.0, help="seconds before the first and the last request")
    ap.add_argument("--data", help="the NQ file or its folder (default: $EDGEWISE_DATA, ../shared/data)")
    ap.add_argument("--baseline-src", help="another checkout's src folder: its server is started the same way")
    ap.add_argument("--tiny", action="store_true", help="1 start, 4 requests, 20 chunks (a smoke test)")
    args = ap.parse_args(argv)
    if args.tiny:
        args.starts, args.requests, args.sizes, args.idle = 1, 4, "20", 0.1
    sizes = [int(x) for x in args.sizes.split(",")]
    path = data_path("nq-open-oracle-dev.jsonl.gz", args.data)
    variants = {"server": None, **({"baseline": args.baseline_src} if args.baseline_src else {})}
    print(f"edgewise {edgewise.__version__}; Python {sys.version.split()[0]}; {os.cpu_count()} CPUs (shared with "
          f"other jobs); budget {args.budget}; {args.starts} starts x {args.requests} requests per server and size, "
          f"texts never sent before; load average {os.getloadavg()[0]:.2f} before")
    rows = []
    for n in sizes:
        runs: dict[str, list[list[float]]] = {v: [] for v in variants}
        for k in range(args.starts):
            pool = inputs(path, n, args.requests, seed=1000 * n + k)
            bodies = [json.dumps({**p, "options": {"budget": args.budget}}).encode() for p in pool]
            for name, src in variants.items():  # both servers get the same texts, each fresh to it
                server = Server(1, pythonpath=src)
                try:
                    runs[name].append(one_start(server, bodies, args.idle))
                finally:
                    server.stop()
        rows += [(n, name, r) for name, r in runs.items()]
    print()
    print("| server | chunks | starts | first ms | after-idle ms | others ms | first / others | "
          "after-idle / others | worst first / others |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, name, runs_ in rows:  # each column: the median over the starts
        firsts, lasts = [r[0] for r in runs_], [r[-1] for r in runs_]
        others = [statistics.median(r[1:-1]) for r in runs_]
        worst = max(f / o for f, o in zip(firsts, others))
        first, last, other = statistics.median(firsts), statistics.median(lasts), statistics.median(others)
        print(f"| {name} | {n} | {len(runs_)} | {first:.2f} | {last:.2f} | {other:.2f} | {first / other:.2f}× | "
              f"{last / other:.2f}× | {worst:.2f}× |")
    print(f"\nload average {os.getloadavg()[0]:.2f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
