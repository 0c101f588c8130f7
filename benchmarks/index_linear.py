"""How `edgewise index`'s reading and chunking grow with the input: seconds and peak RSS per size.

Two inputs that used to be quadratic: one line of text with no sentence break (read, then chunked
at 256 cl100k tokens), and HTML nested N ``<div>`` deep (read to text). Each size runs in a fresh
process (so its peak RSS is its own), the sizes doubling, so the ratio column should stay near 2×
(it is read off CPU seconds, which a shared machine disturbs less than wall seconds).
Beside them, at small sizes only, the methods they replace, in the same run: cutting a long
sentence by truncating the whole rest of it each time, and marking HTML blocks by inserting line
breaks into the tree.

    python benchmarks/index_linear.py                      # text up to 100 MB, HTML up to 100k nesting
    python benchmarks/index_linear.py --text-mb 0.5,1 --nesting 1000,2000 --old-text-mb 0.5 --old-nesting 1000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

WORDS = ("alpha", "beta", "gamma", "delta", "river", "stone", "light", "harbour", "seven", "12")


def _text(n_chars: int, kind: str) -> str:
    import base64
    import random

    rng = random.Random(1)
    if kind == "base64":
        return base64.b64encode(rng.randbytes(n_chars))[:n_chars].decode()
    out, size = [], 0
    while size < n_chars:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n_chars]


def _old_units(text: str, tok, size: int) -> list:
    """The cut this benchmark compares against: each piece truncated from the whole rest of the sentence."""
    from edgewise.prune.sentences import split_sentences

    out = []
    for s in split_sentences(text):
        start, rest = s.start, s.text
        while rest:
            head = tok.truncate(rest, size) or rest[:1]
            cut = len(head)
            out.append((start, start + len(rest[:cut].rstrip())))
            lead = len(rest[cut:]) - len(rest[cut:].lstrip())
            start, rest = start + cut + lead, rest[cut:].lstrip()
    return out


def _old_html(data: bytes) -> str:
    """The HTML reading this benchmark compares against: line breaks inserted into the tree."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data, "html.parser")
    for tag in soup.find_all(("div", "p")):
        tag.insert_before("\n")
        tag.insert_after("\n")
    return soup.get_text()


def child(args: list[str]) -> None:
    """One measurement in this process: prints seconds, peak RSS (MiB) and the output's size."""
    import resource
    import tempfile
    from pathlib import Path

    what, method, size = args[0], args[1], float(args[2])
    if what == "text":
        from edgewise.index.chunking import split_text
        from edgewise.tokens.tokenizers import get_tokenizer

        tok = get_tokenizer("cl100k_base")
        split_text("Warm up. " * 200, tok, size=256, overlap=32)  # the tokenizer and sentence splitter loaded
        text = _text(int(size * 1e6), args[3])
        t, cpu = time.perf_counter(), time.process_time()
        out = split_text(text, tok, size=256, overlap=32) if method == "new" else _old_units(text, tok, 256)
    else:
        from edgewise.index.readers import read_document

        n = int(size)
        data = ("<html><body>" + "<div>x " * n + "</div>" * n + "</body></html>").encode()
        path = Path(tempfile.mkdtemp()) / "nested.html"
        path.write_bytes(data)
        t, cpu = time.perf_counter(), time.process_time()
        out = read_document(path).text if method == "new" else _old_html(data)
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "cpu": cpu, "rss_mib": rss, "out": len(out)}))


def measure(what: str, method: str, size: float, kind: str, timeout: float) -> dict | None:
    cmd = [sys.executable, __file__, "--child", what, method, str(size), kind]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def table(title: str, unit: str, rows: list[tuple[float, dict | None, dict | None]]) -> list[str]:
    lines = [f"### {title}", "", f"| {unit} | CPU seconds | × the row above | wall seconds | peak RSS MiB | outputs | "
             "replaced method: CPU seconds | × the row above |", "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    prev = prev_old = None
    for size, new, old in rows:
        ratio = f"{new['cpu'] / prev:.2f}×" if new and prev else ""
        old_s = "" if old is False else ("timed out" if old is None else f"{old['cpu']:.2f}")
        old_r = f"{old['cpu'] / prev_old:.2f}×" if old and prev_old else ""
        cells = ((f"{new['cpu']:.2f}", ratio, f"{new['seconds']:.2f}", f"{new['rss_mib']:.0f}", f"{new['out']:,}")
                 if new else ("timed out",) * 5)
        lines.append(f"| {size:g} | " + " | ".join(cells) + f" | {old_s} | {old_r} |")
        prev, prev_old = (new["cpu"] if new else None), (old["cpu"] if old else None)
    return lines


def main(argv: list[str] | None = None) -> list[str]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--text-mb", default=",".join(f"{100 / 2 ** k:g}" for k in range(11, -1, -1)),
                   help="text sizes in MB (10^6 characters); default 100 MB halved down to 0.05 MB")
    p.add_argument("--nesting", default="3125,6250,12500,25000,50000,100000", help="HTML nesting depths")
    p.add_argument("--kinds", default="words,base64", help="text without sentence breaks: words, base64")
    p.add_argument("--old-text-mb", default=",".join(f"{100 / 2 ** k:g}" for k in (11, 10, 9)),
                   help="sizes the replaced cut also runs at")
    p.add_argument("--old-nesting", default="3125,6250,12500", help="depths the replaced HTML reading also runs at")
    p.add_argument("--timeout", type=float, default=600, help="seconds before one measurement is given up")
    a = p.parse_args(argv)
    old_mb = {float(x) for x in a.old_text_mb.split(",") if x}
    old_depth = {float(x) for x in a.old_nesting.split(",") if x}
    lines = [f"python {sys.version.split()[0]}; each cell one fresh process; the machine: 2 cores, shared"]
    for kind in a.kinds.split(","):
        sizes = sorted(old_mb | {float(x) for x in a.text_mb.split(",")})
        rows = [(mb, measure("text", "new", mb, kind, a.timeout),
                 measure("text", "old", mb, kind, a.timeout) if mb in old_mb else False) for mb in sizes]
        lines += ["", *table(f"one line of {kind} text, no sentence break: split_text at 256 tokens", "MB", rows)]
    depths = sorted(old_depth | {float(x) for x in a.nesting.split(",")})
    rows = [(d, measure("html", "new", d, "", a.timeout),
             measure("html", "old", d, "", a.timeout) if d in old_depth else False) for d in depths]
    lines += ["", *table("HTML nested N <div> deep: read_document", "nesting", rows)]
    print("\n".join(lines), flush=True)
    return lines


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2:])
    else:
        main()
