"""Compare pack's whole output on the golden cases with another checkout's, field by field.

``tests/core/test_golden.py`` holds each case to a recorded SHA-256, which says *that* an output changed.
This script says *what* changed against another checkout: it runs every golden case under both
checkouts (each in its own interpreter, ``PYTHONPATH=<checkout>/src``) and checks that prompts,
messages and every debug field are equal, except the reasons of chunks that the newer code drops on a
lower bound without encoding them; for each of those it checks the bound against the old exact
count (the old cost exceeded the tokens left; the tags bound is at most the old exact tags cost and
leaves less than ``min_truncated_tokens``).

    git worktree add /tmp/before 8d7f05f
    .venv/bin/python benchmarks/golden_diff.py --against /tmp/before
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DUMP = """
import json, sys
sys.path.insert(0, {root!r})
from tests.core import test_golden as g
from edgewise import pack
from edgewise.errors import EdgewiseError
out = {{}}
for name, label, opts in g._cases():
    q, ch = g.INPUTS[name]()
    try:
        out[f"{{name}} {{label}}"] = pack(q, ch, **opts).to_dict()
    except EdgewiseError as e:
        out[f"{{name}} {{label}}"] = {{"error": str(e)}}
json.dump(out, open(sys.argv[1], "w"))
"""
REASON = re.compile(
    r"does not fit: needs (?:(\d+) tokens|more than (\d+) tokens \(it has more words\)) whole"
    r"(?:, (?:(\d+)|more than (\d+)) as its summary)?, (\d+) left: too few to truncate it to (\d+) tokens "
    r"plus (?:(\d+)|at least (\d+)) for its tags$")


def dump(checkout: Path, path: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(checkout / "src")}
    subprocess.run([sys.executable, "-c", DUMP.format(root=str(ROOT)), path], check=True, env=env)
    return json.loads(Path(path).read_text())


def check_reason(old: str, new: str) -> None:
    o, n = REASON.match(old), REASON.match(new)
    assert o and n, (old, new)
    (o_need, _, o_sum, _, left, least, o_tags, o_least), (n_need, n_more, n_sum, n_sum_more, n_left, n_min, n_tags, n_least) = (
        o.groups(), n.groups())
    left_i, least_i = int(left), int(least)
    assert (n_left, n_min) == (left, least) and o_need is not None, (old, new)
    assert (n_need == o_need) if n_more is None else (int(n_more) == left_i and int(o_need) > left_i), (old, new)
    if o_sum is not None:
        assert (n_sum == o_sum) if n_sum_more is None else int(o_sum) > left_i, (old, new)
    if n_least is not None and o_tags is not None:
        assert int(n_least) <= int(o_tags) and left_i - int(n_least) < least_i, (old, new)
    else:
        assert (n_tags, n_least) == (o_tags, o_least), (old, new)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", required=True, type=Path, help="the other checkout (its src/ is imported)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        before, after = dump(args.against, f"{tmp}/before.json"), dump(ROOT, f"{tmp}/after.json")
    differ = reasons = 0
    for key, old in before.items():
        new = after[key]
        if old == new:
            continue
        differ += 1
        assert "debug_info" in old and "debug_info" in new, key
        assert (old["prompt"], old["messages"]) == (new["prompt"], new["messages"]), key
        do, dn = old["debug_info"], new["debug_info"]
        assert {k: v for k, v in do.items() if k not in ("chunks", "dropped")} == {
            k: v for k, v in dn.items() if k not in ("chunks", "dropped")}, key
        assert [d["id"] for d in do["dropped"]] == [d["id"] for d in dn["dropped"]], key
        for ro, rn in zip(do["chunks"], dn["chunks"], strict=True):
            if ro != rn:
                assert {k: v for k, v in ro.items() if k != "reason"} == {k: v for k, v in rn.items() if k != "reason"}
                check_reason(ro["reason"], rn["reason"])
                reasons += 1
    print(f"{len(before)} golden cases; {len(before) - differ} byte-identical; {differ} differ only in the reasons of "
          f"{reasons} chunks dropped on a lower bound, each consistent with the old exact count")
    return 0


if __name__ == "__main__":
    sys.exit(main())
