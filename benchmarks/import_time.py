"""How long `import edgewise` takes, next to the standard-library modules it needs anyway.

Each measurement is a fresh interpreter (`python -X importtime -c "import edgewise"`), so nothing is
cached in the process; the table gives the median over `--runs` of the cumulative import time of
`edgewise`, and of the stdlib modules alone, and lists any heavy module the import pulled in.
Then the heavy modules each CLI command imports (``-X importtime`` of a real run): the CLI adds a
subcommand's flags only when it is named, so ``--help`` and ``pack`` import no eval backend, and
plugins (``importlib.metadata``) are read only to list names or find one that is not built in.
The package is byte-compiled first, as `pip install` does, and PYTHONDONTWRITEBYTECODE is dropped
from the children's environment: otherwise every import would compile the sources again.

    .venv/bin/python benchmarks/import_time.py --runs 15
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
from pathlib import Path

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
HEAVY = ("numpy", "onnxruntime", "torch", "tokenizers", "tiktoken", "jinja2", "haystack", "llama_cpp", "matplotlib",
         "urllib.request", "http.client", "edgewise.eval", "importlib.metadata", "unittest")
ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {  # each run as `python -m edgewise ...` from the repository root
    "edgewise --help": ["--help"],
    "edgewise pack (examples, default scorer)": ["pack", "--query", "@examples/query.txt", "--chunks",
                                                 "examples/chunks.json", "--budget", "2000"],
    "edgewise pack --help (lists the registries' names: reads plugins)": ["pack", "--help"],
}
STDLIB = "import json, re, dataclasses, typing, collections, math, threading"


def cumulative_us(statement: str, module: str) -> int:
    """Cumulative import time, in microseconds, of the top-level `module` in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", statement], capture_output=True, text=True,
                         check=True, env=ENV)
    total = 0
    for line in out.stderr.splitlines():
        parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[2] in module.split(",") and parts[1].isdigit():
            total += int(parts[1])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    import edgewise

    compileall.compile_dir(str(Path(edgewise.__file__).parent), quiet=1)
    ours = [cumulative_us("import edgewise", "edgewise") / 1000 for _ in range(args.runs)]
    base = [cumulative_us(STDLIB, "json,re,dataclasses,typing,collections,math,threading") / 1000 for _ in range(args.runs)]
    probe = f"import sys, edgewise; print(','.join(sorted(m for m in {HEAVY!r} if m in sys.modules)) or 'none')"
    heavy = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    load = open("/proc/loadavg").read().split()[:3] if sys.platform == "linux" else ["?"] * 3
    print(f"Python {sys.version.split()[0]}; median of {args.runs} fresh interpreters; load average {' / '.join(load)}\n")
    print("| import | median ms | min ms | max ms |")
    print("|---|---:|---:|---:|")
    print(f"| `import edgewise` (cumulative) | {statistics.median(ours):.1f} | {min(ours):.1f} | {max(ours):.1f} |")
    print(f"| stdlib it needs, alone (`{STDLIB[7:]}`) | {statistics.median(base):.1f} | {min(base):.1f} | {max(base):.1f} |")
    print(f"\nheavy modules loaded by `import edgewise`: {heavy}")
    for label, argv in COMMANDS.items():
        out = subprocess.run([sys.executable, "-X", "importtime", "-m", "edgewise", *argv], capture_output=True,
                             text=True, check=True, env=ENV, cwd=ROOT)
        loaded = {line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
        found = sorted(h for h in HEAVY if any(m == h or m.startswith(h + ".") for m in loaded))
        print(f"heavy modules loaded by `{label}`: {', '.join(found) or 'none'}")


if __name__ == "__main__":
    main()
