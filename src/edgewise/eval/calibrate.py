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

FORMAT = "edgewise-profile/1"


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
              points: int | None = None, model: str | None = None) -> dict[str, Any]:
    """Compute a run's profile and write it to ``out`` (when given) as JSON.

    The profile carries what :class:`edgewise.order.profiles.Profile` reads: the model's catalogue name
    (``model``, default the run's model's: ``gemma-3-270m-q4_k_m`` is ``gemma-3-270m``), the task, the layout, the document count, the rows it was
    measured on and, when the run holds pruned re-scored conditions, whether pruning paid
    (:func:`prune_gain`)."""
    results, manifest = load_results(run_dir)
    prof = profile(results, condition, points)
    measured_on = [r for r in results if r["condition"] == condition]
    n_docs = Counter(r.get("n_docs") or 1 for r in measured_on).most_common(1)[0][0]
    params = manifest.get("task_params") or {}
    from ..catalog import resolve_name

    prof.update({
        "format": FORMAT, "model": model or resolve_name(prof["model"]) or prof["model"], "backend_model": prof["model"],
        "layout": manifest.get("layout") or "paper", "n_docs": n_docs,
        "rows": {"task_params": params, "examples": sorted({r["example"] for r in measured_on}, key=_natural)},
        "prune": prune_gain(results, against=condition),
        "source": str(run_dir),
    })
    if out is not None:
        Path(out).write_text(json.dumps(prof, indent=2) + "\n", encoding="utf-8")
    return prof


def _natural(eid: str) -> tuple[str, int]:
    head, _, tail = eid.rpartition("-")
    return (head, int(tail)) if tail.isdigit() else (eid, -1)


def prune_gain(results: Sequence[dict[str, Any]], against: str = "baseline", alpha: float = 0.05) -> dict[str, Any] | None:
    """Whether sentence pruning paid in a run: each re-scored condition with a ``prune`` threshold,
    paired (McNemar, pooled over positions) with ``against``; the best such threshold, and ``pays``
    when its pooled gain is positive with p < ``alpha``. None when the run holds no pruned condition.

    >>> rs = [{"condition": c, "example": e, "position": p, "correct": v, "model": "m", "prompt_tokens": t}
    ...       for e in range(12) for p in (0, 1)
    ...       for c, v, t in (("baseline", float(e == 0), 100), ("edgewise:prune=0.3,rescore=True", 1.0, 40))]
    >>> g = prune_gain(rs)
    >>> g["threshold"], g["pays"], g["only_condition"], g["only_against"], g["tokens_saved"]
    (0.3, True, 22, 0, 0.6)
    """
    from .report import paired
    from .runner import parse_condition

    pooled = {r["condition"]: r for r in paired(results, against=against) if r["position"] == "all"}
    options = []
    for name, row in pooled.items():
        if not name.startswith("edgewise:"):
            continue
        opts = parse_condition(name).options
        if opts.get("prune") is None or not opts.get("rescore"):
            continue
        mine = [r["prompt_tokens"] for r in results if r["condition"] == name and r.get("prompt_tokens")]
        base = [r["prompt_tokens"] for r in results if r["condition"] == against and r.get("prompt_tokens")]
        saved = 1 - (sum(mine) / len(mine)) / (sum(base) / len(base)) if mine and base else None
        options.append({"threshold": float(opts["prune"]), "condition": name, "pairs": row["pairs"],
                        "only_against": row["only_against"], "only_condition": row["only_condition"],
                        "difference": round(row["difference"], 6), "p": round(row["p"], 6),
                        "tokens_saved": None if saved is None else round(saved, 3),
                        "pays": row["difference"] > 0 and row["p"] < alpha})
    if not options:
        return None
    best = max(options, key=lambda o: (o["pays"], o["difference"], -o["p"]))
    return {**best, "alpha": alpha, "tried": options}


def grid(prune: Sequence[float] = ()) -> list[str]:
    """The conditions a calibration measures: the baseline (the key document at each measured
    place) and, per pruning threshold, the re-scored pipeline pruned at it."""
    return ["baseline"] + [f"edgewise:order=edges,scorer=dense,rescore=true,prune={t:g},prune_scorer=dense"
                           for t in prune]


def measure(run_dir: str | Path, backend: Any, *, task: str = "qa", docs: int | None = None, pairs: int | None = None,
            examples: int = 30, offset: int | None = None, data: str | None = None, positions: str | None = None,
            prune: Sequence[float] = (), progress: bool | None = None, layout: str = "paper",
            metric: str = "best_subspan_em") -> Any:
    """Run the small calibration grid (:func:`grid`) of ``task`` against ``backend`` into ``run_dir``:
    the key document first, in the middle and last (or ``positions``), ``examples`` questions each.
    ``task="custom"`` measures your own rows (``data``: the JSONL of ``edgewise eval run --task
    custom``, in ``layout``, scored by ``metric``). An existing run directory is resumed. Returns the
    runner's summary."""
    from ..order import slot_index
    from .runner import parse_condition, run
    from .tasks import build_task

    opts: dict[str, Any] = {"examples": examples, "data": data}
    if task == "qa":
        opts.update(docs=docs, offset=offset)
    elif task == "kv":
        opts.update(pairs=pairs)
        if offset:
            raise InputError(f"offset applies to task qa, but got task {task!r} with offset {offset}")
    elif task == "custom":
        opts.update(layout=layout, metric=metric)
        if offset:
            raise InputError(f"offset applies to task qa, but got task {task!r} with offset {offset}")
    else:
        raise InputError(f"calibration measures task qa, kv or custom, but got {task!r}")
    for t in prune:
        if not 0 <= t <= 1:
            raise InputError(f"each prune threshold must be in [0, 1], but got {t:g}")
    built = build_task(task, **opts)
    n = min(len(e.chunks) for e in built.examples)
    if positions:
        wanted = [slot_index(p.strip(), n) for p in positions.split(",") if p.strip()]
    else:
        wanted = sorted({slot_index(p, n) for p in ("first", "middle", "last")})
    built = build_task(task, positions=wanted, **opts)
    return run(built, [parse_condition(c) for c in grid(prune)], backend, run_dir, progress=progress)
