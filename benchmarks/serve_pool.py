"""Threads or processes for the service's CPU work? One request's cost and the event loop's lag.

For N chunks (default 20 and 200, ~120 words each, with scores) and a budget of 2,000 cl100k
tokens, each way of running ``Packer.pack`` from an asyncio event loop handles the same R requests
(alternated, fresh chunk texts per request, so the count cache helps no way more than another):

- ``inline``: called on the loop itself (blocks it; the baseline);
- ``thread``: ``anyio.to_thread.run_sync`` (what the service does), the request and the reply
  dict passed by reference;
- ``process``: a ``ProcessPoolExecutor`` of 2 workers via ``loop.run_in_executor``: the chunks
  are pickled to the worker and the reply dict back.

Columns: ``ms / request``: median wall time of one request, sent one at a time; ``loop lag ms``:
with ``--concurrency`` requests in flight at once, the worst delay of a 1 ms heartbeat on the
loop (how long the loop could not answer anything else, e.g. /healthz); ``CPU ms / request``: the
parent process's CPU time per request in the sequential run (the pickling the process pool adds
shows here). The machine is shared: the load average is printed with the table.

    .venv/bin/python benchmarks/serve_pool.py --requests 200 > docs/bench/serve-pool.txt
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial

import anyio.to_thread

WORDS = ("river mountain capital city history france paris europe seine museum tower bridge market food "
         "wine cheese train station school garden park street church castle island harbor").split()


def make_chunks(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [{"id": f"{seed}-{i}", "text": " ".join(rng.choice(WORDS) for _ in range(120)), "score": rng.random()}
            for i in range(n)]


def pack_dict(query: str, chunks: list[dict]) -> dict:
    from edgewise.packing.packer import default_packer

    return default_packer().pack(query, chunks, budget=2000).to_dict()


async def heartbeat(stop: asyncio.Event, lags: list[float]) -> None:
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(0.001)
        lags.append(time.perf_counter() - t - 0.001)


async def run_way(way: str, pool: ProcessPoolExecutor, requests: list[list[dict]], concurrency: int) -> dict:
    loop = asyncio.get_running_loop()

    async def one(chunks: list[dict]) -> dict:
        call = partial(pack_dict, "capital of france", chunks)
        if way == "inline":
            return call()
        if way == "thread":
            return await anyio.to_thread.run_sync(call)
        return await loop.run_in_executor(pool, call)

    half = len(requests) // 2
    walls = []
    cpu0 = time.process_time()
    for chunks in requests[:half]:
        t = time.perf_counter()
        await one(chunks)
        walls.append(time.perf_counter() - t)
    cpu = (time.process_time() - cpu0) / half
    stop, lags = asyncio.Event(), []
    beat = asyncio.create_task(heartbeat(stop, lags))
    rest = requests[half:]
    for i in range(0, len(rest), concurrency):
        await asyncio.gather(*(one(c) for c in rest[i : i + concurrency]))
    stop.set()
    await beat
    return {"ms": statistics.median(walls) * 1000, "lag": max(lags, default=0) * 1000, "cpu": cpu * 1000}


async def main_async(args: argparse.Namespace) -> None:
    ways = ("inline", "thread", "process")
    with ProcessPoolExecutor(2) as pool:
        await asyncio.gather(*(asyncio.get_running_loop().run_in_executor(pool, pack_dict, "warm", make_chunks(5, i))
                               for i in range(4)))  # start the workers and load their tokenizer
        pack_dict("warm", make_chunks(5, 99))
        print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs; budget 2000; "
              f"{args.requests} requests per way, half one at a time, half {args.concurrency} at once")
        print(f"{'chunks':>6}  {'way':<8}  {'ms / request':>12}  {'loop lag ms':>11}  {'CPU ms / request':>16}")
        for n in args.chunks:
            results = {w: [] for w in ways}
            for rep in range(args.rounds):  # alternate the ways, fresh texts for each
                for k, w in enumerate(ways):
                    seed = 1000 * n + 100 * rep + 10 * k
                    reqs = [make_chunks(n, seed + i * 7919) for i in range(args.requests // args.rounds)]
                    results[w].append(await run_way(w, pool, reqs, args.concurrency))
            for w in ways:
                rs = results[w]
                print(f"{n:>6}  {w:<8}  {statistics.median(r['ms'] for r in rs):>12.2f}  "
                      f"{max(r['lag'] for r in rs):>11.1f}  {statistics.median(r['cpu'] for r in rs):>16.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chunks", type=int, nargs="+", default=[20, 200])
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--concurrency", type=int, default=4)
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    main()
