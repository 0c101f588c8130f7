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
after ``/healthz`` answered, and each of the last ``--after-idle`` (default 3) ``--idle`` seconds
after the one before it, so those show what any request after such a pause costs in a warm process
(CPU caches gone cold while other jobs ran). Reported per server and chunk count: the server's own
time (``duration_ms`` of its access log) of the first request, of the after-idle ones (a start's
median), and the median of the others between them, each the median over the starts, and their
ratios: first against the others sent back to back, and first against the after-idle requests, the
same work after the same pause (what the first pays once is that ratio); the worst first against
after-idle over the starts too, and each start's ratios on a line below the table.

With ``--floor`` a third server runs beside them, the same way: the floor, a bare HTTP/1.1 server
on an asyncio loop (uvloop, as uvicorn picks it) that does what ``/v1/pack`` does in a plain
function on its loop (orjson in, ``Packer.pack``, orjson out), with no framework, no middleware,
no worker thread and no limits, warmed and frozen out of the garbage collector as ``edgewise
serve`` is (:func:`floor_server`). Its ratios are what the pause alone costs the same work on this
machine. Below the table, the round trip of its ``/healthz`` (a few microseconds of Python) after
the pause and back to back, seen by the client: what waking both processes costs, in µs.

    .venv/bin/python benchmarks/serve_first.py [--starts 5] [--requests 30] [--sizes 20,200]
        [--budget 4000] [--idle 1] [--after-idle 3] [--data FILE|DIR] [--baseline-src DIR] [--floor] [--tiny]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_load import Server, free_port, inputs  # noqa: E402

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

    def get(self, path: str) -> tuple[int, bytes]:
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        return self._reply()

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        self.sock.sendall(head + body)
        return self._reply()

    def _reply(self) -> tuple[int, bytes]:
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


class Started(Server):
    """A server of this script's own (the floor, the instrumented server) in a subprocess on a free
    port, started by ``python serve_first.py FLAG PORT ...``; :class:`Server`'s ``durations`` and ``stop``."""

    def __init__(self, flag: str, *args: str) -> None:  # noqa: D107 - Server's start is edgewise serve's
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
        self.proc = subprocess.Popen([sys.executable, __file__, flag, str(self.port), *args],
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        self.read = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                client = RawClient(self.url)
            except OSError:
                time.sleep(0.2)
                continue
            try:
                if client.get("/healthz")[0] == 200:
                    return
            finally:
                client.close()
        self.stop()
        raise RuntimeError(f"{flag} did not answer /healthz on {self.url} within 60 s")


def floor_server(port: int) -> None:
    """Serve ``POST /v1/pack`` (and ``GET /healthz``) on 127.0.0.1:``port`` with nothing but the work:
    each request is read whole, then parsed by orjson, packed by the shared default Packer and
    written back by orjson, in a plain function on the loop. Before it listens it packs the warm-up
    bodies of ``edgewise serve`` (:data:`edgewise.serve.api.warmup.CALLS`) the same way, then collects and
    freezes what the start built (``gc.freeze``), with the counter sped up as the server's is. Each
    pack's line on stderr holds ``duration_ms``: from its headers parsed to its reply written."""
    import asyncio
    import gc

    import orjson

    from edgewise.options import PackOptions
    from edgewise.packing.packer import default_packer
    from edgewise.serve.api.warmup import CALLS

    packer = default_packer()
    tok = packer.tokenizer(packer.options)
    tok.count("warm up")
    if (speed_up := getattr(tok, "speed_up", None)) is not None:
        speed_up()

    def pack(body: bytes) -> bytes:
        req = orjson.loads(body)
        out = packer.pack(req["query"], req["chunks"], PackOptions.from_dict(req.get("options", {})))
        return orjson.dumps(out.to_dict("openai"))

    for _, path, body, _ in CALLS:
        if path == "/v1/pack" and body is not None and "chunks" in body:
            pack(orjson.dumps(body))
    gc.collect()
    gc.freeze()

    def reply(status: str, data: bytes) -> bytes:
        return (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n"
                .encode() + data)

    class Bare(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            self.transport, self.buf = transport, b""
            transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def data_received(self, data: bytes) -> None:
            self.buf += data
            while b"\r\n\r\n" in self.buf:
                head, rest = self.buf.split(b"\r\n\r\n", 1)
                start = time.perf_counter()
                lines = head.decode("latin-1").split("\r\n")
                length = next((int(v) for k, _, v in (h.partition(":") for h in lines[1:])
                               if k.strip().lower() == "content-length"), 0)
                if len(rest) < length:
                    return
                body, self.buf = rest[:length], rest[length:]
                path = lines[0].split()[1]
                if path == "/v1/pack":
                    self.transport.write(reply("200 OK", pack(body)))
                    ms = (time.perf_counter() - start) * 1000
                    sys.stderr.write(json.dumps({"path": path, "duration_ms": round(ms, 3)}) + "\n")
                    sys.stderr.flush()
                else:
                    self.transport.write(reply("200 OK", b'{"status":"ok"}'))

    async def serve() -> None:
        server = await asyncio.get_running_loop().create_server(Bare, "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    try:
        import uvloop
    except ImportError:
        asyncio.run(serve())
    else:
        uvloop.run(serve())


#: the marks of one instrumented /v1/pack, in order, and what happens between each and the next
MARKS = ("recv", "head", "app", "body", "json", "handler", "submit", "thread", "packed", "encoded", "resumed",
         "written")
STEPS = {"recv": "request line and headers parsed (before the server's clock)",
         "head": "to the app: uvicorn's request cycle (before the server's clock)",
         "app": "middleware, routing, body read",
         "body": "JSON decode (orjson) and the characters counted",
         "json": "pydantic validation, the key check, to the handler",
         "handler": "size checks, admission",
         "submit": "handoff: the loop to a worker thread",
         "thread": "the pack (Packer.pack, to_dict)",
         "packed": "JSON encode (orjson)",
         "encoded": "handoff: the worker thread back to the loop",
         "resumed": "the response written"}


def stage_server(port: int, out: str, http: str) -> None:
    """``edgewise serve`` on ``port`` with marks (:data:`MARKS`) taken inside each ``/v1/pack``: its
    request's first bytes, headers parsed, the app called (where the access log's clock starts),
    body read and decoded, the handler entered, submitted to the pool, started on a worker thread,
    packed, encoded, back on the loop, reply written (where the clock stops). Each mark is
    ``perf_counter_ns`` with the process's minor page faults so far; the worker's CPU time of the
    pack and the encode too. One JSON line per request to ``out``; the warm-up's are not marked.
    (The server's code is wrapped at run time, a few µs a mark: for where time goes, not for totals.)"""
    import resource

    from edgewise.cli import main as cli
    from edgewise.serve.api import admission, codec, metrics, routes
    from edgewise.serve.transport import connections

    rec: dict[str, Any] = {}
    sink = open(out, "a", buffering=1)  # noqa: SIM115 - open while the server runs

    def mark(name: str) -> None:
        if name not in rec:
            rec[name] = (time.perf_counter_ns(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt)

    def wrap(cls: Any, name: str, make: Any) -> None:
        setattr(cls, name, make(getattr(cls, name)))

    def received(orig: Any) -> Any:
        def data_received(self: Any, data: bytes) -> None:
            if self._in_head() and self._head_bytes == 0:  # the first bytes of a request
                rec.clear()
                mark("recv")
            orig(self, data)
        return data_received

    def head_done(orig: Any) -> Any:
        def _head_done(self: Any) -> None:
            mark("head")
            orig(self)
        return _head_done

    def observed(orig: Any) -> Any:
        async def call(self: Any, scope: Any, receive: Any, send: Any) -> None:
            if scope.get("type") != "http" or scope.get(metrics.WARM_UP_KEY) or scope.get("path") != "/v1/pack":
                return await orig(self, scope, receive, send)

            async def sending(message: Any) -> None:
                await send(message)
                if message["type"] == "http.response.body" and not message.get("more_body"):
                    mark("written")
            mark("app")
            await orig(self, scope, receive, sending)
            sink.write(json.dumps(rec) + "\n")
        return call

    def read_json(orig: Any) -> Any:
        async def json_(self: Any) -> Any:
            await self.body()
            mark("body")
            value = await orig(self)
            mark("json")
            return value
        return json_

    def admitted(orig: Any) -> Any:
        async def run(self: Any, fn: Any, timeout_s: float) -> Any:
            def job() -> Any:
                mark("thread")
                cpu = time.thread_time_ns()
                try:
                    return fn()
                finally:
                    rec["cpu_ns"] = time.thread_time_ns() - cpu
            mark("submit")
            result = await orig(self, job, timeout_s)
            mark("resumed")
            return result
        return run

    def encoded(orig: Any) -> Any:
        def write(value: Any, *, fast: bool) -> bytes:
            mark("packed")
            data = orig(value, fast=fast)
            mark("encoded")
            return data
        return write

    def entered(orig: Any) -> Any:
        async def run(request: Any, fn: Any, body: Any) -> Any:
            mark("handler")
            return await orig(request, fn, body)
        return run

    wrap(connections._Guard, "data_received", received)
    wrap(connections._Guard, "_head_done", head_done)
    wrap(metrics.Observe, "__call__", observed)
    wrap(routes.StrictJSONRequest, "json", read_json)
    wrap(admission.Admission, "run", admitted)
    wrap(codec, "write", encoded)
    wrap(routes, "run", entered)
    cli(["serve", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--http", http])


def stage_rows(records: list[list[dict[str, Any]]]) -> list[tuple[str, float, float, float]]:
    """Per step (and the clock, the worker's CPU, the page faults): the first request's, the last's
    (after the pause) and the median of the others, each the median over the starts."""
    def steps(r: dict[str, Any]) -> dict[str, float]:
        marks = [m for m in MARKS if m in r]
        out = {STEPS[a]: (r[b][0] - r[a][0]) / 1e3 for a, b in zip(marks, marks[1:])}
        out["the server's clock (app called to reply written)"] = (r["written"][0] - r["app"][0]) / 1e3
        out["worker CPU time (pack and encode)"] = r.get("cpu_ns", 0) / 1e3
        out["minor page faults (first bytes to reply written), count"] = r["written"][1] - r["recv"][1]
        return out

    per_start = [[steps(r) for r in run] for run in records]
    names = list(per_start[0][0])
    rows = []
    for name in names:
        first = statistics.median(s[0][name] for s in per_start)
        last = statistics.median(s[-1][name] for s in per_start)
        other = statistics.median(statistics.median(x[name] for x in s[1:-1]) for s in per_start)
        rows.append((name, first, last, other))
    return rows


def stages(path: Path, sizes: list[int], starts: int, requests: int, budget: int, idle: float) -> None:
    """The instrumented server (:func:`stage_server`), h11 and httptools, as the main table's starts."""
    print("\nWhere the time goes (µs; instrumented server; median over the starts):")
    for n in sizes:
        for http in ("httptools", "h11"):
            runs = []
            for k in range(starts):
                pool = inputs(path, n, requests, seed=1000 * n + k)
                bodies = [json.dumps({**p, "options": {"budget": budget}}).encode() for p in pool]
                out = tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False).name
                server = Started("--stage-server", out, http)
                try:
                    one_start(server, bodies, idle)
                finally:
                    server.stop()
                runs.append([json.loads(line) for line in Path(out).read_text().splitlines()])
                Path(out).unlink()
            print(f"\n{n} chunks, --http {http}, {starts} starts\n")
            print("| step | first | after-idle | others | first − others |")
            print("|---|---:|---:|---:|---:|")
            for name, first, last, other in stage_rows(runs):
                print(f"| {name} | {first:.0f} | {last:.0f} | {other:.0f} | {first - other:+.0f} |")


def round_trips(url: str, idle: float, pauses: int, between: int = 20) -> tuple[float, float]:
    """The client's µs for ``GET /healthz``: the median after ``idle`` s of quiet, and back to back."""
    client = RawClient(url)
    after, back = [], []
    try:
        for _ in range(pauses):
            time.sleep(idle)
            for i in range(between + 1):
                start = time.perf_counter()
                client.get("/healthz")
                (after if i == 0 else back).append((time.perf_counter() - start) * 1e6)
    finally:
        client.close()
    return statistics.median(after), statistics.median(back)


def one_start(server: Server, bodies: list[bytes], idle: float, paused: int = 1) -> list[float]:
    """The server's ms for each body, sent one at a time: the first ``idle`` s after /healthz answered,
    each of the last ``paused`` ``idle`` s after the one before it (requests after the same pause, in
    a warm process)."""
    client = RawClient(server.url)
    try:
        for i, body in enumerate(bodies):
            if i == 0 or i >= len(bodies) - paused:
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
    ap.add_argument("--idle", type=float, default=1.0, help="seconds before the first and each after-idle request")
    ap.add_argument("--after-idle", type=int, default=3, metavar="K",
                    help="the last K requests of a start each follow such a pause (default 3)")
    ap.add_argument("--data", help="the NQ file or its folder (default: $EDGEWISE_DATA, ../shared/data)")
    ap.add_argument("--baseline-src", help="another checkout's src folder: its server is started the same way")
    ap.add_argument("--floor", action="store_true", help="a bare server doing the same packs, beside them")
    ap.add_argument("--stages", action="store_true", help="then where the time goes: the instrumented server")
    ap.add_argument("--floor-server", type=int, metavar="PORT", help=argparse.SUPPRESS)  # the floor's own process
    ap.add_argument("--stage-server", nargs=3, metavar=("PORT", "OUT", "HTTP"), help=argparse.SUPPRESS)
    ap.add_argument("--tiny", action="store_true", help="1 start, 4 requests, 20 chunks (a smoke test)")
    args = ap.parse_args(argv)
    if args.floor_server:
        floor_server(args.floor_server)
        return 0
    if args.stage_server:
        port, out, http = args.stage_server
        stage_server(int(port), out, http)
        return 0
    if args.tiny:
        args.starts, args.requests, args.sizes, args.idle, args.after_idle = 1, 4, "20", 0.1, 1
    if not 1 <= args.after_idle <= args.requests - 2:
        raise SystemExit(f"--after-idle must be from 1 to --requests - 2 ({args.requests - 2}), but got {args.after_idle}")
    sizes = [int(x) for x in args.sizes.split(",")]
    path = data_path("nq-open-oracle-dev.jsonl.gz", args.data)
    variants = {"server": None, **({"baseline": args.baseline_src} if args.baseline_src else {}),
                **({"floor": "floor"} if args.floor else {})}
    print(f"edgewise {edgewise.__version__}; Python {sys.version.split()[0]}; {os.cpu_count()} CPUs (shared with "
          f"other jobs); budget {args.budget}; {args.starts} starts x {args.requests} requests per server and size, "
          f"texts never sent before; load average {os.getloadavg()[0]:.2f} before")
    rows = []
    for n in sizes:
        runs: dict[str, list[list[float]]] = {v: [] for v in variants}
        for k in range(args.starts):
            pool = inputs(path, n, args.requests, seed=1000 * n + k)
            bodies = [json.dumps({**p, "options": {"budget": args.budget}}).encode() for p in pool]
            names = list(variants)
            for name in names[k % len(names):] + names[:k % len(names)]:  # each goes first in turn
                src = variants[name]  # every server gets the same texts, each fresh to it
                server = Started("--floor-server") if src == "floor" else Server(1, pythonpath=src)
                try:
                    runs[name].append(one_start(server, bodies, args.idle, args.after_idle))
                finally:
                    server.stop()
        rows += [(n, name, r) for name, r in runs.items()]
    print()
    print("| server | chunks | starts | first ms | after-idle ms | others ms | first / others | "
          "after-idle / others | first / after-idle | worst first / after-idle |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    spread = []
    k = args.after_idle
    for n, name, runs_ in rows:  # each column: the median over the starts
        firsts = [r[0] for r in runs_]
        lasts = [statistics.median(r[-k:]) for r in runs_]  # a start's after-idle: the median of its K
        others = [statistics.median(r[1:-k]) for r in runs_]
        ratios = [f / o for f, o in zip(firsts, others)]
        paused = [f / a for f, a in zip(firsts, lasts)]
        first, last, other = statistics.median(firsts), statistics.median(lasts), statistics.median(others)
        print(f"| {name} | {n} | {len(runs_)} | {first:.2f} | {last:.2f} | {other:.2f} | {first / other:.2f}× | "
              f"{last / other:.2f}× | {first / last:.2f}× | {max(paused):.2f}× |")
        idle = sorted(a / o for a, o in zip(lasts, others))
        spread.append(f"{name}, {n} chunks: first / others {', '.join(f'{x:.2f}×' for x in sorted(ratios))}; "
                      f"after-idle / others {', '.join(f'{x:.2f}×' for x in idle)}; "
                      f"first / after-idle {', '.join(f'{x:.2f}×' for x in sorted(paused))}")
    print("\neach start (sorted):")
    print("\n".join(spread))
    if args.floor:
        floor = Started("--floor-server")
        try:
            after, back = round_trips(floor.url, args.idle, max(args.starts, 3))
        finally:
            floor.stop()
        print(f"\nthe floor's GET /healthz, round trip seen by the client: {after:.0f} µs after {args.idle:g} s of quiet, "
              f"{back:.0f} µs back to back (median of {max(args.starts, 3)} pauses)")
    if args.stages:
        stages(path, sizes, args.starts, args.requests, args.budget, args.idle)
    print(f"\nload average {os.getloadavg()[0]:.2f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
