"""Synthetic position profiles for the ``order="auto"`` tests, and what packing by them gives.

A profile here is what ``edgewise eval calibrate`` writes (:mod:`edgewise.order.profiles`), with made-up
numbers: ``LAST_BEST`` measures the last of four places best (70%), then the first (40%), the third
(15%) and the second (10%), so the calibrated order puts the best chunk last, the second best first,
the third best third and the worst second. Each point's 95% interval is its accuracy ± ``half``
(clipped to [0, 1]): 0.05 keeps the best and worst places apart (the profile is used), 0.35 makes
them overlap (the difference is within its noise, and ``auto`` falls back to ``edges``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LAST_BEST = (0.4, 0.1, 0.15, 0.7)
QUERY = "Which city is the capital of France?"
# best first by score; sentences the query does not need, for the pruning tests
CHUNKS = [{"id": "a", "text": "Paris is the capital of France. The Seine runs through it. Bananas are yellow.", "score": 0.9},
          {"id": "b", "text": "Lyon is a large city in France. It is known for its food.", "score": 0.7},
          {"id": "c", "text": "France is a country in Europe. Its capital city is Paris.", "score": 0.5},
          {"id": "d", "text": "Berlin is the capital of Germany. Germany borders France.", "score": 0.3}]
PLACED_BY_LAST_BEST = ["b", "d", "c", "a"]  # CHUNKS placed by LAST_BEST: the best chunk (a) last
PLACED_BY_EDGES = ["a", "c", "d", "b"]


def profile(model: str = "gpt-4o", accuracy: tuple[float, ...] = LAST_BEST, *, half: float = 0.05, n: int = 200,
            **fields: Any) -> dict[str, Any]:
    """A profile's JSON object: ``accuracy`` measured at each place with ``n`` examples."""
    k = len(accuracy)
    measured = [{"position": i, "relative_position": i / (k - 1), "n": n, "accuracy": a,
                 "interval": [round(max(a - half, 0.0), 4), round(min(a + half, 1.0), 4)]}
                for i, a in enumerate(accuracy)]
    return {"model": model, "task": "qa", "layout": "paper", "n_docs": k, "accuracy": list(accuracy),
            "measured": measured, **fields}


def write_profile(directory: Path, data: dict[str, Any] | None = None, name: str | None = None) -> Path:
    """Write ``data`` (default: :func:`profile`) into ``directory`` as ``MODEL--TASK-LAYOUT-N.json``
    (the name ``edgewise eval calibrate --install`` gives), or as ``name``; returns the path."""
    data = profile() if data is None else data
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (name or f"{data['model']}--{data['task']}-{data['layout']}-{data['n_docs']}.json")
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def placement(path: Path | None, reason: str, *, order: str | None = None, prune: float | None = None,
              profile_prune: float | None = None, model: str = "gpt-4o", n_docs: int = 4) -> dict[str, Any]:
    """The debug record's ``placement`` for a pack with ``order="auto"`` (``path``: the profile
    chosen, used or not; ``order`` defaults to the profile's calibrated order)."""
    chosen = None if path is None else {"name": f"{model}/qa-paper-{n_docs}", "path": str(path), "model": model,
                                        "task": "qa", "layout": "paper", "n_docs": n_docs}
    return {"requested": "auto", "order": order or f"calibrated:{path}", "reason": reason, "prune": prune,
            "profile_prune": profile_prune, "profile": chosen}
