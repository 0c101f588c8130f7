"""``edgewise eval run|report|calibrate``: a thin layer over :mod:`edgewise.eval`.

Wire it into the main parser with ``add_commands(sub)``, where ``sub`` is the object returned by
``parser.add_subparsers(...)``. Every command is one library call plus I/O; errors are
:class:`~edgewise.errors.EdgewiseError` for the main CLI to print as one line with status 2.

>>> import argparse
>>> from edgewise.cli.lazy import build_named
>>> parser = argparse.ArgumentParser(prog="edgewise"); sub = parser.add_subparsers(dest="command")
>>> add_commands(sub)
>>> build_named(parser, ["eval", "run"])
>>> a = parser.parse_args(["eval", "run", "--task", "kv", "--pairs", "10", "-o", "runs/x"])
>>> a.task, a.pairs, a.condition, a.backend
('kv', 10, None, 'local')
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import InputError
from .lazy import command
from .output import write_out


def _ints(text: str, what: str) -> list[int]:
    return _listed(text, what, int, "integers")


def _listed(text: str, what: str, kind: Any, plural: str) -> list[Any]:
    try:
        return [kind(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise InputError(f"{what} must be comma-separated {plural}, but got {text!r}") from None


def cmd_run(a: argparse.Namespace) -> None:
    from ..eval.runner import parse_condition, run
    from ..eval.tasks import build_task

    conditions = [parse_condition(c) for c in (a.condition or ["baseline", "edgewise:order=edges"])]
    task_opts: dict[str, Any] = {"examples": a.examples, "seed": a.seed, "data": a.data, "max_tokens": a.max_tokens}
    if a.task == "kv":
        task_opts.update(pairs=a.pairs, generate=a.generate or None)
    elif a.task == "qa":
        task_opts.update(docs=a.docs)
        if a.offset is not None:
            task_opts.update(offset=a.offset)
    elif a.task == "needle":
        task_opts.update(lengths=_ints(a.lengths, "--lengths") if a.lengths else None)
    elif a.task == "custom":
        task_opts.update(layout=a.layout, metric=a.metric)
    positions = _ints(a.positions, "--positions") if a.positions else None
    task = build_task(a.task, positions=positions, **task_opts)
    backend = _backend(a)
    if a.ray_address is None and a.ray_task_cpus is not None:
        raise InputError(f"--ray-task-cpus applies to a run on Ray: add --ray-address, or drop --ray-task-cpus {a.ray_task_cpus:g}")
    summary = run(task, conditions, backend, a.out, progress=False if a.quiet else None,
                  ray_address=a.ray_address, ray_task_cpus=a.ray_task_cpus, reuse=not a.no_reuse)
    write_out(json.dumps({"run": summary.out_dir, "total": summary.total, "already_done": summary.skipped,
                      "done_now": summary.done, "seconds": round(summary.seconds, 1)}))


def cmd_report(a: argparse.Namespace) -> None:
    from ..eval.report import report

    out = report(a.run, a.out, charts=False if a.no_charts else None, against=a.against)
    write_out(out["markdown"])
    for note in out["notes"]:
        print(f"edgewise: note: {note}", file=sys.stderr)
    gap = out.get("missing")
    if gap and gap["missing"]:
        print(f"edgewise: warning: incomplete grid: {gap['missing']} of {gap['planned']} planned results are missing",
              file=sys.stderr)
    print("wrote: " + ", ".join(out["paths"].values()), file=sys.stderr)


def cmd_calibrate(a: argparse.Namespace) -> None:
    from ..eval.calibrate import calibrate, measure
    from ..order.profiles import Profile, install

    if a.task is not None:  # measure first: the small grid, into the run directory (resumed if it exists)
        backend = _backend(a)
        model = a.model_name or _catalogue_name(backend)
        measure(a.run, backend, task=a.task, docs=a.docs, pairs=a.pairs, examples=a.examples, offset=a.offset,
                data=a.data, positions=a.positions, prune=_numbers(a.prune, "--prune") if a.prune else (),
                progress=False if a.quiet else None, layout=a.layout, metric=a.metric)
    else:
        model = a.model_name
    prof = calibrate(a.run, a.output if a.output not in ("-", None) else None, condition=a.condition,
                     points=a.points, model=model)
    if a.install:
        path = install(Profile.from_dict(prof), a.profile_dir)
        print(f"installed {path}", file=sys.stderr)
    if a.output == "-" or (a.output is None and not a.install):
        write_out(json.dumps(prof, indent=2))
    elif a.output is not None:
        print(f"wrote {a.output}: accuracy {prof['accuracy']}", file=sys.stderr)


def _numbers(text: str, what: str) -> list[float]:
    return _listed(text, what, float, "numbers")


def _backend(a: argparse.Namespace) -> Any:
    from ..eval.backends import get_backend

    if a.backend == "local":
        return get_backend("local", model=a.model, model_path=a.model_path, n_ctx=a.n_ctx, n_threads=a.threads)
    return get_backend(a.backend, base_url=a.base_url, model=a.model, api=a.api, api_key_env=a.api_key_env,
                       concurrency=a.concurrency, retries=a.retries, timeout=a.timeout, backoff=a.backoff)


def _catalogue_name(backend: Any) -> str:
    """The catalogue name a profile is filed under: the backend's model's (a GGUF file's
    quantisation suffix resolves to its family: ``gemma-3-270m-q4_k_m`` → ``gemma-3-270m``)."""
    from ..catalog import resolve_name

    return resolve_name(backend.model) or backend.model


def _run_args(r: argparse.ArgumentParser) -> None:
    from ..eval.tasks import task_names

    r.add_argument("--task", required=True, help=f"one of: {', '.join(task_names())}")
    r.add_argument("--examples", "-n", type=int, help="examples (per context length for needle)")
    r.add_argument("--positions", help="comma-separated key positions (needle: depths in percent)")
    r.add_argument("--pairs", type=int, help="kv: records per example (default 20)")
    r.add_argument("--generate", action="store_true", help="kv: random UUID records instead of the paper's data")
    r.add_argument("--docs", type=int, help="qa: documents per question (default 10)")
    r.add_argument("--lengths", help="needle: comma-separated context lengths in tokens (default 250,500,1000)")
    r.add_argument("--offset", type=int, help="qa: the first built question asked (default 0): another offset asks "
                   "other questions, e.g. to measure a profile on rows an evaluation does not report")
    r.add_argument("--data", help="data file (custom: the JSONL; kv/qa/needle: override the shared data)")
    r.add_argument("--task-layout", dest="layout", default="paper", help="custom: layout of the baseline prompt (default paper)")
    r.add_argument("--metric", default="best_subspan_em", help="custom: best_subspan_em or kv_exact")
    r.add_argument("--seed", type=int, help="sampling seed for the examples (default 0)")
    r.add_argument("--max-tokens", type=int, help="answer length limit")
    r.add_argument("--condition", action="append",
                   help="baseline or edgewise:key=value,... (repeatable; default: baseline and edgewise:order=edges)")
    _backend_args(r)
    r.add_argument("--ray-address", metavar="ADDR",
                   help="openai: send the requests from Ray tasks on this cluster (auto, HOST:PORT, ray://HOST:PORT, "
                        "or local to start one); --concurrency requests at once; results are stored here")
    r.add_argument("--ray-task-cpus", type=float, help="CPUs each Ray task asks for (default 0.25: it mostly waits)")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.add_argument("--no-reuse", action="store_true",
                   help="ask every cell, even one whose prompt is identical to one already answered in the run "
                        "(by default its answer is reused: greedy decoding gives the same one)")
    r.add_argument("-o", "--out", required=True, help="run directory (created; an existing one is resumed)")
    r.set_defaults(func=cmd_run, on_interrupt="run the same command to resume")


def _report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run directory")
    p.add_argument("-o", "--out", help="where to write (default: the run directory)")
    p.add_argument("--no-charts", action="store_true", help="Markdown only (without matplotlib the charts are left out anyway, with a note saying how to get them)")
    p.add_argument("--against", default="baseline", metavar="CONDITION",
                   help="the condition the others are paired with (McNemar), as the run names it (default baseline)")
    p.set_defaults(func=cmd_report)


def _backend_args(r: argparse.ArgumentParser) -> None:
    from ..eval.backends import backend_names

    r.add_argument("--backend", default="local", help=f"one of: {', '.join(backend_names())} (default local)")
    r.add_argument("--model-path", help="local: a GGUF file (default: the bundled Gemma 3 270M)")
    r.add_argument("--n-ctx", type=int, help="local: context window (default 8192)")
    r.add_argument("--threads", type=int, help="local: CPU threads")
    r.add_argument("--base-url", help="openai: endpoint, e.g. http://127.0.0.1:8080/v1")
    r.add_argument("--model", help="openai: the endpoint's model name; local: a model edgewise assembles (gemma-3-270m, "
                                    "the default, or qwen2.5-coder-1.5b-instruct with the qwen extra)")
    r.add_argument("--api", choices=["completions", "chat"], help="openai: endpoint kind (default completions)")
    r.add_argument("--api-key-env", help="openai: environment variable holding the key (default OPENAI_API_KEY)")
    r.add_argument("--concurrency", type=int, help="openai: requests at once (default 4)")
    r.add_argument("--retries", type=int, help="openai: retries on 429/5xx/timeouts (default 5)")
    r.add_argument("--backoff", type=float, help="openai: first retry wait in seconds, doubled each time (default 1)")
    r.add_argument("--timeout", type=float, help="openai: seconds per request (default 120)")


def _calibrate_args(c: argparse.ArgumentParser) -> None:
    c.add_argument("run", help="run directory: read, or (with --task) measured into first, resuming what it holds")
    c.add_argument("-o", "--output", default=None, help="profile JSON file ('-': stdout, the default without --install)")
    c.add_argument("--install", action="store_true",
                   help="put the profile in the profile directory, where order=auto finds it")
    c.add_argument("--profile-dir", help="with --install: this directory (default $XDG_CONFIG_HOME/edgewise/profiles)")
    c.add_argument("--model-name", help="the catalogue name the profile is for (default: the run's model; the "
                                        "bundled Gemma's is gemma-3-270m)")
    c.add_argument("--condition", default="baseline", help="whose accuracy to use (default baseline)")
    c.add_argument("--points", type=int, help="points in the profile (default: the document count)")
    m = c.add_argument_group("measure first (the small grid: the key document first, in the middle and last)")
    m.add_argument("--task", choices=("qa", "kv", "custom"),
                   help="measure this task into RUN before computing the profile (custom: your rows, --data FILE)")
    m.add_argument("--docs", type=int, help="qa: documents per question (default 10)")
    m.add_argument("--pairs", type=int, help="kv: records per example (default 20)")
    m.add_argument("--examples", "-n", type=int, default=30, help="questions per position (default 30)")
    m.add_argument("--offset", type=int, help="qa: the first built question (default 0); use rows your evaluation "
                                              "does not report")
    m.add_argument("--positions", help="comma-separated positions (default: first, middle and last)")
    m.add_argument("--prune", help="comma-separated pruning thresholds to measure too (re-scored, edges), e.g. 0.05,0.3")
    m.add_argument("--data", help="data file (qa/kv: override the shared data; custom: your JSONL of question, answers, "
                                  "chunks, key_id)")
    m.add_argument("--task-layout", dest="layout", default="paper", help="custom: layout of the prompt (default paper)")
    m.add_argument("--metric", default="best_subspan_em", help="custom: best_subspan_em or kv_exact")
    m.add_argument("--quiet", action="store_true", help="no progress bar")
    _backend_args(m)
    c.set_defaults(func=cmd_calibrate, on_interrupt="run the same command to resume")


def add_commands(subparsers: Any) -> None:
    """Add ``eval`` with its ``run``, ``report`` and ``calibrate`` subcommands (their flags are added
    when the command is named: only ``eval run`` imports the backends and tasks it lists)."""

    def subcommands(ev: argparse.ArgumentParser) -> None:
        sub = ev.add_subparsers(dest="eval_command", required=True)
        command(sub, "run", _run_args, help="run a task under conditions against a backend (resumes an existing run)",
                epilog="example: edgewise eval run --task kv --pairs 20 --positions 0,5,10,15,19 --examples 50 "
                       "--backend local --condition baseline --condition edgewise:order=edges -o runs/kv20")
        command(sub, "report", _report_args, help="write report.md and accuracy.png (and needle.png) for a run")
        command(sub, "calibrate", _calibrate_args,
                help="write the per-position accuracy profile for --order calibrated:FILE")

    command(subparsers, "eval", subcommands, help="measure accuracy vs position with a real LLM; report; calibrate")
