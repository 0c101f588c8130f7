"""Summaries of a run: accuracy per condition and position with 95% Wilson intervals.

:func:`summarize` turns results into rows; :func:`markdown` prints them as a table;
:func:`report` writes ``report.md`` (flagging at the top the results the run planned but does not
hold), ``accuracy.png`` (accuracy vs position, one line per condition, interval bands) and, for the
needle task, ``needle.png`` (length x depth heatmaps). The charts need matplotlib (extra ``eval``);
without it the Markdown is written alone and the result's ``notes`` say so.

>>> rows = summarize([{"condition": "baseline", "position": 0, "correct": 1.0, "model": "m"},
...                   {"condition": "baseline", "position": 0, "correct": 0.0, "model": "m"}])
>>> rows[0]["accuracy"], rows[0]["n"], [round(x, 3) for x in rows[0]["interval"]]
(0.5, 2, [0.095, 0.905])
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from statistics import mean
from typing import Any

from ..errors import InputError, install_hint
from .metrics import first_line, mcnemar_exact, wilson
from .store import Store, plan_cells


def load_results(run_dir: str | Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The results and manifest of a run directory; an error if it holds none."""
    path = Path(run_dir)
    if not path.is_dir():
        raise InputError(f"run directory {str(path)!r} does not exist; make it with `edgewise eval run ... -o {path}`")
    store = Store(path)
    results = store.load()
    if not results:
        raise InputError(f"run directory {str(path)!r} holds no results (no complete line in {store.path.name}); "
                         f"run `edgewise eval run ... -o {path}` first")
    return results, store.manifest()


def missing(results: Sequence[dict[str, Any]], manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The results the last run of the directory planned (its ``run.json`` plan) that are not stored:
    ``{"planned", "missing", "by_condition": {condition: {"planned", "missing", "positions": {position: n}}}}``;
    ``None`` when the manifest records no plan (written before plans were recorded).

    >>> plan = {"examples": ["e1", "e2"], "positions": [0], "grid": [["baseline", [0]]], "key": {"task": "kv"}}
    >>> done = [{"key": k} for k, *_ in list(plan_cells(plan))[:1]]
    >>> missing(done, {"plan": plan})["missing"]
    1
    """
    plan = manifest.get("plan")
    if not isinstance(plan, dict):
        return None
    have = {r.get("key") for r in results}
    out: dict[str, Any] = {"planned": 0, "missing": 0, "by_condition": {}}
    for key, _, pos, cond in plan_cells(plan):
        c = out["by_condition"].setdefault(cond, {"planned": 0, "missing": 0, "positions": {}})
        out["planned"] += 1
        c["planned"] += 1
        if key not in have:
            out["missing"] += 1
            c["missing"] += 1
            c["positions"][pos] = c["positions"].get(pos, 0) + 1
    return out


def completeness(gaps: dict[str, Any] | None) -> list[str]:
    """The report's lines about the grid: a warning with counts when results are missing."""
    if gaps is None:
        return ["`run.json` records no plan (it predates plans), so whether the grid is complete was not checked.", ""]
    if not gaps["missing"]:
        return []
    parts = []
    for cond, c in gaps["by_condition"].items():
        if c["missing"]:
            where = ", ".join(f"{'once per example' if p is None else f'position {p}'}: {n}" for p, n in sorted(c["positions"].items(), key=lambda pn: _sortable(pn[0])))
            parts.append(f"`{cond}` {c['missing']} of {c['planned']} ({where})")
    return [f"> **Incomplete grid: {gaps['missing']} of {gaps['planned']} planned results are missing** "
            "(condition × position × example, as the last `edgewise eval run` into this directory planned them; "
            "run the same command to finish). Missing: " + "; ".join(parts) + ".", ""]


def _label(r: dict[str, Any], many_models: bool) -> str:
    return f"{r['condition']} [{r['model']}]" if many_models else r["condition"]


def _avg(values: Sequence[Any]) -> float | None:
    vals = [v for v in values if isinstance(v, (int, float))]
    return mean(vals) if vals else None


def summarize(results: Sequence[dict[str, Any]], by: str = "position") -> list[dict[str, Any]]:
    """One row per (condition, ``by``) plus an ``all`` row per condition, in first-seen order."""
    many = len({r.get("model") for r in results}) > 1
    groups: dict[tuple[str, Any], list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        label = _label(r, many)
        if r.get(by) is not None:  # reference conditions (closedbook, oracle) have no position
            groups[(label, r.get(by))].append(r)
        groups[(label, "all")].append(r)
    rows = []
    for (label, value), rs in groups.items():
        n = len(rs)
        k = sum(float(r["correct"]) for r in rs)
        rows.append({
            "condition": label, by: value, "n": n, "correct": k, "accuracy": k / n, "interval": list(wilson(k, n)),
            "prompt_tokens": _avg([r.get("prompt_tokens") for r in rs]),
            "packed_tokens": _avg([r.get("packed_tokens") for r in rs]),
            "seconds": _avg([r.get("seconds") for r in rs]),
            "key_prompt_position": _avg([r.get("prompt_position") for r in rs]),
            "empty": sum(1 for r in rs if not first_line(str(r.get("prediction", ""))).strip()) / n,
        })
    return _ordered(rows, by)


def _ordered(rows: list[dict[str, Any]], by: str) -> list[dict[str, Any]]:
    """Rows grouped by condition in first-seen order, by value within each, the ``all`` row last."""
    conds = list(dict.fromkeys(r["condition"] for r in rows))
    return sorted(rows, key=lambda r: (conds.index(r["condition"]), r[by] == "all", _sortable(r[by])))


def _sortable(v: Any) -> tuple[int, Any]:
    return (0, v) if isinstance(v, (int, float)) else (1, str(v))


def _fmt(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def markdown(rows: Sequence[dict[str, Any]], by: str = "position") -> str:
    """A Markdown table of :func:`summarize` rows."""
    head = (f"| condition | {by} | n | accuracy | 95% interval | key at (mean) | prompt tokens (model) "
            "| prompt tokens (cl100k) | seconds | empty answers |")
    lines = [head, "|" + " --- |" * 10]
    for r in rows:
        lo, hi = r["interval"]
        lines.append(
            f"| {r['condition']} | {r[by]} | {r['n']} | {r['accuracy']:.3f} | {lo:.3f}–{hi:.3f} "
            f"| {_fmt(r['key_prompt_position'], 1)} | {_fmt(r['prompt_tokens'])} | {_fmt(r['packed_tokens'])} "
            f"| {_fmt(r['seconds'], 2)} | {r['empty']:.0%} |"
        )
    return "\n".join(lines)


def paired(results: Sequence[dict[str, Any]], against: str = "baseline", by: str = "position") -> list[dict[str, Any]]:
    """Each positional condition against ``against`` on the same (model, example, position) pairs.

    Per condition and ``by`` value (plus ``all``): the number of pairs, how many only ``against``
    got right, how many only the condition got right, the accuracy difference (condition minus
    ``against``) and the exact McNemar p-value. Pairs are what makes a small difference on the same
    examples detectable when two Wilson intervals still overlap.

    >>> rs = [{"condition": c, "example": e, "position": 0, "correct": v, "model": "m"}
    ...       for e, (a, b) in enumerate([(0, 1)] * 9 + [(1, 0), (1, 1)]) for c, v in (("baseline", a), ("x", b))]
    >>> [(r["position"], r["pairs"], r["only_against"], r["only_condition"], round(r["p"], 4)) for r in paired(rs)]
    [(0, 11, 1, 9, 0.0215), ('all', 11, 1, 9, 0.0215)]
    """
    many = len({r.get("model") for r in results}) > 1
    base = {(r.get("model"), r["example"], r.get(by)): r for r in results
            if r["condition"] == against and r.get(by) is not None}
    groups: dict[tuple[str, Any], list[tuple[float, float]]] = defaultdict(list)
    for r in results:
        if r["condition"] == against or r.get(by) is None:
            continue
        other = base.get((r.get("model"), r["example"], r.get(by)))
        if other is None:
            continue
        pair = (float(other["correct"]), float(r["correct"]))
        groups[(_label(r, many), r.get(by))].append(pair)
        groups[(_label(r, many), "all")].append(pair)
    rows = []
    for (label, value), pairs in groups.items():
        only_against = sum(1 for a, b in pairs if a > b)
        only_condition = sum(1 for a, b in pairs if b > a)
        rows.append({"condition": label, by: value, "pairs": len(pairs), "only_against": only_against,
                     "only_condition": only_condition,
                     "difference": (sum(b for _, b in pairs) - sum(a for a, _ in pairs)) / len(pairs),
                     "p": mcnemar_exact(only_against, only_condition)})
    return _ordered(rows, by)


def paired_markdown(rows: Sequence[dict[str, Any]], against: str = "baseline", by: str = "position") -> str:
    """A Markdown table of :func:`paired` rows."""
    lines = [f"| condition | {by} | pairs | only {against} right | only condition right | difference | McNemar p |",
             "|" + " --- |" * 7]
    for r in rows:
        lines.append(f"| {r['condition']} | {r[by]} | {r['pairs']} | {r['only_against']} | {r['only_condition']} "
                     f"| {r['difference']:+.3f} | {'<0.001' if r['p'] < 0.001 else format(r['p'], '.3f')} |")
    return "\n".join(lines)


CHARTS_NEED = f"the report's charts need matplotlib: {install_hint('eval')}"


def building(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """What building the prompts cost, per condition, from the records' ``build_seconds`` (packing,
    and writing any summary an LLM writes; a summary cached by an earlier cell costs that cell
    nothing, so the total is what the whole grid paid): prompts, total, mean and largest build
    seconds, and the mean seconds of the answers. Empty when no record has ``build_seconds``.

    >>> rs = [{"condition": "c", "build_seconds": b, "seconds": 1.0, "model": "m"} for b in (3.0, 0.5, 0.5)]
    >>> [(r["condition"], r["prompts"], r["total"], r["mean"], r["max"], r["answer_seconds"]) for r in building(rs)]
    [('c', 3, 4.0, 1.3333333333333333, 3.0, 1.0)]
    """
    if not any(isinstance(r.get("build_seconds"), (int, float)) for r in results):
        return []
    many = len({r.get("model") for r in results}) > 1
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        groups[_label(r, many)].append(r)
    rows = []
    for label, rs in groups.items():
        built = [float(r["build_seconds"]) for r in rs if isinstance(r.get("build_seconds"), (int, float))]
        rows.append({"condition": label, "prompts": len(rs), "total": sum(built), "mean": _avg(built),
                     "max": max(built, default=None), "answer_seconds": _avg([r.get("seconds") for r in rs])})
    return rows


def building_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """A Markdown table of :func:`building` rows."""
    lines = ["| condition | prompts | build seconds, total | build seconds, mean | build seconds, largest "
             "| answer seconds, mean |", "|" + " --- |" * 6]
    for r in rows:
        lines.append(f"| {r['condition']} | {r['prompts']} | {_fmt(r['total'], 1)} | {_fmt(r['mean'], 3)} "
                     f"| {_fmt(r['max'], 2)} | {_fmt(r['answer_seconds'], 2)} |")
    return "\n".join(lines)


def _pyplot():  # noqa: ANN202
    try:
        import matplotlib
    except ImportError:
        raise ImportError(CHARTS_NEED) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_positions(rows: Sequence[dict[str, Any]], path: str | Path, title: str = "", xlabel: str = "position") -> Path:
    """Accuracy vs position, one line per condition, 95% Wilson bands."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 4.2), dpi=120)
    xs_all = sorted({r["position"] for r in rows if r["position"] != "all"})
    for cond in dict.fromkeys(r["condition"] for r in rows):
        pts = [r for r in rows if r["condition"] == cond and r["position"] != "all"]
        if not pts:  # a reference condition: one level across all positions
            ref = next(r for r in rows if r["condition"] == cond)
            if xs_all:
                line = ax.plot([xs_all[0], xs_all[-1]], [ref["accuracy"]] * 2, linestyle="--", label=cond)[0]
                ax.fill_between([xs_all[0], xs_all[-1]], [ref["interval"][0]] * 2, [ref["interval"][1]] * 2,
                                alpha=0.08, color=line.get_color())
            continue
        xs = [r["position"] for r in pts]
        ax.plot(xs, [r["accuracy"] for r in pts], marker="o", label=cond)
        ax.fill_between(xs, [r["interval"][0] for r in pts], [r["interval"][1] for r in pts], alpha=0.15)
    # zero stays on the axis; the top follows the highest interval so low-accuracy tasks stay readable
    top = max((r["interval"][1] for r in rows), default=1.0)
    ax.set_ylim(-0.02, min(1.02, max(0.2, top) * 1.15 + 0.02))
    ax.set_xlabel(xlabel)
    ax.set_ylabel("accuracy (95% Wilson interval)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # beside: labels are long
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return Path(path)


def plot_needle(results: Sequence[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Needle-in-a-haystack heatmaps: context length (rows) x depth % (columns), one per condition."""
    plt = _pyplot()
    conds = list(dict.fromkeys(r["condition"] for r in results))
    fig, axes = plt.subplots(1, len(conds), figsize=(4.5 * len(conds), 3.6), dpi=120, squeeze=False)
    for ax, cond in zip(axes[0], conds):
        rs = [r for r in results if r["condition"] == cond]
        lengths = sorted({(r.get("meta") or {}).get("length") for r in rs}, key=_sortable)
        depths = sorted({r["position"] for r in rs})
        grid = []
        for length in lengths:
            row = []
            for d in depths:
                cell = [r["correct"] for r in rs if (r.get("meta") or {}).get("length") == length and r["position"] == d]
                row.append(mean(cell) if cell else float("nan"))
            grid.append(row)
        im = ax.imshow(grid, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
        ax.set_xticks(range(len(depths)), [str(d) for d in depths])
        ax.set_yticks(range(len(lengths)), [str(x) for x in lengths])
        ax.set_xlabel("depth %")
        ax.set_ylabel("context tokens")
        ax.set_title(cond, fontsize=9)
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                ax.text(j, i, "-" if v != v else f"{v:.2f}", ha="center", va="center", fontsize=8)
    fig.colorbar(im, ax=list(axes[0]), shrink=0.8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.savefig(path)
    plt.close(fig)
    return Path(path)


def report(run_dir: str | Path, out_dir: str | Path | None = None, *, charts: bool | None = None,
           against: str = "baseline") -> dict[str, Any]:
    """Write ``report.md`` and the charts for a run; returns the summary rows, the paths written, the
    Markdown, ``missing`` (see :func:`missing`) and ``notes`` (what was left out, and why). An
    incomplete grid is flagged at the top of the Markdown.

    ``charts``: ``None`` (the default) draws them when matplotlib is installed and otherwise writes
    the Markdown alone, with a note saying how to get them; ``True`` requires matplotlib (an
    ``ImportError`` naming the extra without it); ``False`` writes the Markdown alone.
    ``against``: the condition every other one is paired with (McNemar), ``baseline`` by default.
    """
    results, manifest = load_results(run_dir)
    conditions = sorted({r["condition"] for r in results})
    if against != "baseline":
        from .runner import parse_condition

        against = parse_condition(against).name  # as the run names it: options sorted, values canonical
    if results and against != "baseline" and against not in conditions:
        raise InputError(f"against must be a condition of the run ({', '.join(conditions)}), but got {against!r}")
    notes: list[str] = []
    charts = _charts_wanted(charts, notes)
    out = Path(out_dir or run_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = summarize(results)
    models = sorted({r["model"] for r in results})
    task = manifest.get("task") or results[0].get("task", "?")
    unit = manifest.get("position_unit", "index")
    xlabel = "depth % of the needle" if unit == "depth %" else "position of the key chunk (0 = first)"
    title = f"{task} · {', '.join(models)}"
    params = manifest.get("task_params") or {}
    if params:
        title += " · " + ", ".join(f"{k}={v}" for k, v in params.items() if k in ("pairs", "docs", "lengths"))
    ns = [r["n"] for r in rows if r["position"] != "all"] or [len(results)]
    title += f" · n={min(ns)}" + (f"–{max(ns)}" if max(ns) != min(ns) else "") + " per point"
    paths: dict[str, str] = {}
    gaps = missing(results, manifest)
    text = [f"# {title}", "", *completeness(gaps), f"{len(results)} results in `{Path(run_dir)}`.", "",
            "`position` is where the key chunk sat in the retrieved list. For `baseline` that is its place in the "
            "prompt; edgewise conditions place it themselves (`key at` is its mean index in the prompt).", "",
            markdown(rows), ""]
    vs = paired(results, against)
    if vs:
        text += [f"## Paired against {against}", "",
                 f"The same examples at the same retrieval position, under each condition and under {against}. "
                 "Only the pairs where "
                 "exactly one of the two is right say anything about the difference; the p-value is the exact "
                 "two-sided McNemar test on them.", "", paired_markdown(vs, against), ""]
    built = building(results)
    if built:
        text += ["## Building the prompts", "",
                 "Seconds spent building each condition's prompts (packing, and writing the summaries an LLM "
                 "writes; a summary is written once and cached, so the total is what the whole grid paid), "
                 "beside the seconds of the answers.", "", building_markdown(built), ""]
    if task == "needle":
        by_len = [dict(r, position=(r.get("meta") or {}).get("length")) for r in results]
        text += ["## By context length (tokens)", "", markdown(summarize(by_len)).replace("| position |", "| tokens |"), ""]
        if charts:
            paths["needle"] = str(plot_needle(results, out / "needle.png", title))
    if charts:
        paths["accuracy"] = str(plot_positions(rows, out / "accuracy.png", title, xlabel))
        text += [f"![accuracy vs position]({Path(paths['accuracy']).name})", ""]
        if "needle" in paths:
            text += [f"![needle heatmap]({Path(paths['needle']).name})", ""]
    md = out / "report.md"
    md.write_text("\n".join(text), encoding="utf-8")
    paths["markdown"] = str(md)
    return {"rows": rows, "paths": paths, "markdown": "\n".join(text), "missing": gaps, "notes": notes}


def _charts_wanted(charts: bool | None, notes: list[str]) -> bool:
    """Whether to draw the charts; without matplotlib and not asked for by name, a note instead."""
    if charts is False:
        return False
    try:
        _pyplot()
    except ImportError:
        if charts:
            raise
        notes.append(f"{CHARTS_NEED}; wrote report.md without them")
        return False
    return True
