"""A measured position-accuracy profile, for ``order="calibrated:PROFILE.json"``.

The profile is the accuracy of one condition (``baseline`` by default: the key chunk placed at
each position) per relative position, resampled linearly onto evenly spaced points (0 = first
document, 1 = last), which is what :func:`edgewise.order.load_profile` reads. The measured points,
their counts and intervals are kept alongside for the record.

>>> rs = [{"condition": "baseline", "position": p, "slot": p, "n_docs": 5, "correct": c, "model": "m", "task": "kv"}
...       for p, c in [(0, 1.0), (2, 0.0), (4, 1.0)]]
>>> profile(rs)["accuracy"]
[1.0, 0.5, 0.0, 0.5, 1.0]
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..checks import check_int
from ..errors import InputError
from .metrics import wilson
from .report import load_results


def _relative(r: dict[str, Any]) -> float:
    n = r.get("n_docs") or 1
    slot = r.get("slot", r["position"])
    return slot / (n - 1) if n > 1 else 0.0


def profile(results: Sequence[dict[str, Any]], condition: str = "baseline", points: int | None = None) -> dict[str, Any]:
    """The accuracy profile of ``condition``, resampled onto ``points`` (default: the document count)."""
    rs = [r for r in results if r["condition"] == condition]
    if not rs:
        have = sorted({r["condition"] for r in results})
        raise InputError(f"condition must be one of the run's conditions {have}, but got {condition!r}")
    models = sorted({r["model"] for r in rs})
    if len(models) > 1:
        raise InputError(f"a profile is for one model, but the run holds {models}; split the run directory")
    groups: dict[float, list[float]] = defaultdict(list)
    position_of: dict[float, Any] = {}
    for r in rs:
        x = round(_relative(r), 6)
        groups[x].append(float(r["correct"]))
        position_of[x] = r["position"]
    xs = sorted(groups)
    measured = [{"relative_position": x, "position": position_of[x], "n": len(groups[x]),
                 "accuracy": sum(groups[x]) / len(groups[x]), "interval": list(wilson(sum(groups[x]), len(groups[x])))}
                for x in xs]
    if points is None:
        points = Counter(r.get("n_docs") or len(xs) for r in rs).most_common(1)[0][0]
    check_int("points", points, minimum=1)
    ys = [m["accuracy"] for m in measured]
    grid = [i / (points - 1) if points > 1 else 0.0 for i in range(points)]
    return {
        "accuracy": [round(_interp(xs, ys, g), 6) for g in grid],
        "relative_positions": [round(g, 6) for g in grid],
        "measured": measured, "condition": condition, "model": models[0], "task": rs[0].get("task"),
    }


def _interp(xs: list[float], ys: list[float], x: float) -> float:
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return ys[-1]  # pragma: no cover


def calibrate(run_dir: str | Path, out: str | Path | None = None, *, condition: str = "baseline",
              points: int | None = None) -> dict[str, Any]:
    """Compute a run's profile and write it to ``out`` (when given) as JSON."""
    results, _ = load_results(run_dir)
    prof = profile(results, condition, points)
    prof["source"] = str(run_dir)
    if out is not None:
        Path(out).write_text(json.dumps(prof, indent=2) + "\n", encoding="utf-8")
    return prof
