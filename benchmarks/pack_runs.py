"""Side by side: several saved outputs of ``benchmarks/pack.py`` for two versions, run alternately.

One run of ``pack.py`` on a shared machine moves by 10-20% from the next (other guests take the
cores), more than a small change gains; so the versions are run in turns (A, B, A, B...) and each
row's ratios are read from every run. Prints, per row, each version's "pack / encode" and
"pack / loop" medians (and worsts) run by run, and the median over its runs.

    for i in 1 2 3; do
      PYTHONPATH=/tmp/base/src .venv/bin/python benchmarks/pack.py --sizes 20,200 --reps 15 > runs/$i-base.txt
      .venv/bin/python benchmarks/pack.py --sizes 20,200 --reps 15 > runs/$i-after.txt
    done
    .venv/bin/python benchmarks/pack_runs.py runs/*-base.txt -- runs/*-after.txt
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

_RATIO = re.compile(r"([\d.]+)× \(([\d.]+)×\)")


def rows(path: Path) -> dict[tuple[str, str], tuple[float, float, float, float]]:
    """(chunks, budget) -> (pack/encode median, worst, pack/loop median, worst) of one saved run."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 13 and cells[0].replace(",", "").isdigit():
            enc, loop = _RATIO.fullmatch(cells[11]), _RATIO.fullmatch(cells[12])
            if enc and loop:
                out[cells[0], cells[1]] = (float(enc[1]), float(enc[2]), float(loop[1]), float(loop[2]))
    return out


def _each(got: list[tuple[float, float, float, float]], i: int) -> str:
    return "; ".join(f"{g[i]:.2f}× ({g[i + 1]:.2f}×)" for g in got)


def main(argv: list[str]) -> None:
    if "--" not in argv:
        raise SystemExit("usage: pack_runs.py A-RUN... -- B-RUN...")
    cut = argv.index("--")
    sides = {"A": [rows(Path(p)) for p in argv[:cut]], "B": [rows(Path(p)) for p in argv[cut + 1:]]}
    print(f"A: {', '.join(argv[:cut])}\nB: {', '.join(argv[cut + 1:])}\n")
    print("| chunks | budget | version | pack / encode, each run: median (worst) | median of runs "
          "| pack / loop, each run: median (worst) | median of runs |")
    print("|---:|---:|---|---|---:|---|---:|")
    for key in sides["A"][0]:
        for name, runs in sides.items():
            got = [r[key] for r in runs if key in r]
            print(f"| {key[0]} | {key[1]} | {name} | {_each(got, 0)} | {statistics.median(g[0] for g in got):.2f}× "
                  f"| {_each(got, 2)} | {statistics.median(g[2] for g in got):.2f}× |")


if __name__ == "__main__":
    main(sys.argv[1:])
