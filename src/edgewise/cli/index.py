"""``edgewise index``, ``retrieve`` and ``ask``: your own documents, indexed and answered (extra ``index``).

``index`` is :func:`edgewise.index.build.index_paths`; ``retrieve`` is hybrid retrieval then
:func:`edgewise.pack` (the same pack flags as ``edgewise pack``); ``ask`` adds the LLM call
(:func:`edgewise.index.answer.ask`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..jsonin.files import text_arg
from .lazy import command
from .output import dumps, write_out

MODES = ("hybrid", "dense", "bm25")
MAX_FILE_BYTES = 200 * 1024 * 1024  # edgewise.index.readers.MAX_BYTES, without importing the index here
# retrieved chunks carry whole passages: keep the sentences that bear on the question, at the largest
# threshold that keeps >= 98% of the answers on held-out questions (benchmarks/retrieve_retention.py)
ASK_DEFAULTS = {"prune": 0.05}
PRUNE_HELP = ("pruning is on by default: each retrieved chunk keeps only its sentences scoring at least this "
              "threshold, in [0, 1], and where each chunk went (retrieve --table, ask --debug) says how much of it was "
              "kept. What it costs, measured by "
              "benchmarks/retrieve_retention.py on 500 held-out NaturalQuestions questions (BENCHMARKS.md): 0.05 keeps "
              "99.8% of the answers the unpruned prompt holds and saves 2.4% of the tokens at --budget 2000, 31.3% when "
              "the budget holds every hit; 0.1 keeps 98.8% and saves 8.2% (40.5%); 0.3 keeps 87.3%. Answers given differ: "
              "the bundled Gemma 3 270M answered 15% to 18% of NQ at 20 documents pruned at 0.3, 13% at 0.05, 11% "
              "unpruned (EVALUATION.md). --prune 0 keeps every sentence")


def cmd_index(a: argparse.Namespace) -> None:
    from ..errors import InputError
    from ..index.build import index_paths
    from ..index.lock import describe

    def waiting(holder: dict[str, Any]) -> None:
        print(f"edgewise: waiting up to {a.lock_timeout:g} s for another edgewise index writing to {a.store} "
              f"({describe(holder)})", file=sys.stderr)

    report = index_paths(a.paths, a.store, tokenizer=a.tokenizer, chunk_tokens=a.chunk_tokens,
                         overlap_tokens=a.overlap_tokens, rebuild=a.rebuild,
                         progress=False if a.quiet else (True if a.progress else None),
                         max_file_bytes=a.max_file_bytes, lock_timeout=a.lock_timeout, on_wait=waiting)
    for note in report.notes:
        print(f"edgewise: note: {note}", file=sys.stderr)
    for path, reason in report.repaired:
        print(f"edgewise: repaired {path}: {reason}", file=sys.stderr)
    for path, reason in report.failed:
        print(f"edgewise: skipped {path}: {reason}", file=sys.stderr)
    if a.format == "json":
        write_out(dumps(report.to_dict()))
    elif not a.quiet:
        print(report.summary(), file=sys.stderr)
    if report.failed and not (report.added or report.updated or report.unchanged):
        raise InputError(f"nothing to index: every path failed ({len(report.failed)}); see the lines above")
    if report.failed:
        raise SystemExit(1)  # the rest was indexed; the status says not everything was


def _pack_options(a: argparse.Namespace) -> Any:
    from ..options import from_args

    return from_args(a, read_text=text_arg)


def cmd_retrieve(a: argparse.Namespace) -> None:
    from ..index.lance import open_store
    from ..index.search import pack_hits, retrieve
    from ..packing.packer import Packer
    from .pack import _emit, report, write_html

    question = text_arg(a.question, "question") or ""
    hits = retrieve(open_store(a.store), question, top_n=a.top_n, mode=a.mode)
    options = _pack_options(a)
    packed = pack_hits(Packer(options, preload=False), question, hits)  # one pack: a faster counter would cost more to load than it saves
    write_html(a, question, [h.chunk() for h in hits], options, packed, "edgewise retrieve")
    write_out(_emit(packed, a.format))
    report(packed, a.format, a.table)


def cmd_ask(a: argparse.Namespace) -> None:
    from ..eval.backends import get_backend
    from ..index.answer import ask
    from ..index.lance import open_store
    from .pack import notes

    question = text_arg(a.question, "question") or ""
    store = open_store(a.store)  # a missing store fails before a model loads
    options = _ask_options(a)
    if a.backend == "local":
        backend = get_backend("local", model_path=a.model_path, n_ctx=a.context or 4096, api="chat")
    else:
        backend = get_backend("openai", base_url=a.base_url, model=options.model or a.model, api="chat",
                              api_key_env=a.api_key_env)
    answer = ask(question, store, backend, options, top_n=a.top_n, mode=a.mode, max_tokens=a.max_tokens)
    write_out(dumps(answer.to_dict(debug=a.debug)) if a.format == "json" else _shown_answer(answer, a.debug))
    if not a.debug and (note := notes(answer.packed, "--debug")) is not None:
        print(note, file=sys.stderr)


def _shown_answer(answer: Any, debug: bool) -> str:
    """The answer, its sources and (with --debug) where every retrieved chunk went, as text."""
    from .pack import table

    lines = [answer.text or "(the model gave no answer)", "", "Sources (cited):" if answer.cited else
             "Sources (in the prompt; the answer cites none):"]
    for s in answer.sources():
        where = f", page {s['page']}" if "page" in s else ""
        lines.append(f"  [{s['id']}] {s['title']}: {_shown(s['source'])}{where}, characters {s['start']}-{s['end']}")
    if debug:
        lines += ["", "Where every retrieved chunk went:", table(answer.packed)]
    return "\n".join(lines)


def _shown(source: str) -> str:
    """A source path as the user typed it: relative to the working folder when it is under it."""
    import os

    rel = os.path.relpath(source)
    return source if rel.startswith("..") else rel


def _ask_options(a: argparse.Namespace) -> Any:
    """The pack options for ``ask``: the model's tokenizer and a budget that leaves room for the answer."""
    from ..catalog import get_model
    from ..errors import ConfigError
    from ..index.answer import budget_for

    opts = _pack_options(a)
    given = opts.to_dict(changed_only=True)
    if a.backend == "local":
        if opts.model is not None:
            raise ConfigError("--model names the model of an OpenAI-compatible endpoint; the local backend runs "
                              "--model-path (default: the bundled Gemma 3 270M)")
        # the bundled 270M model echoes the sections layout back; the paper's short prompt it answers
        layout = opts.layout if "layout" in given else "paper"
        budget = opts.budget or budget_for(a.context or 4096, a.max_tokens)
        if a.model_path is None and "tokenizer" not in given:  # the bundled Gemma: counted with its own
            from ..catalog import BUNDLED_GEMMA  # tokenizer, placed by its profile with --order auto

            return opts.replace(model=BUNDLED_GEMMA, layout=layout, budget=budget)
        from ..eval.backends import bundled_model_path

        tokenizer = given.get("tokenizer") or f"gguf:{a.model_path or bundled_model_path()}"
        return opts.replace(tokenizer=tokenizer, layout=layout, budget=budget)
    if opts.model is None:
        raise ConfigError("--backend openai needs --model (the endpoint's model name)")
    try:
        spec = get_model(opts.model)
    except ConfigError:
        if opts.budget is None and a.context is None:
            raise ConfigError(f"model {opts.model!r} is not in the registry (edgewise list): give --context (its "
                              "context window in tokens) or --budget, and --tokenizer if it is not cl100k_base") from None
        budget = opts.budget or budget_for(a.context, a.max_tokens)
        a.model = opts.model
        return opts.replace(model=None, budget=budget)
    return opts.replace(budget=opts.budget or budget_for(a.context or spec.context_window, a.max_tokens))


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("question", help="the question (or @FILE)")
    p.add_argument("--store", "-s", required=True, metavar="DIR|URL", help="the store edgewise index wrote")
    p.add_argument("--top-n", type=int, default=20, metavar="N", help="chunks to retrieve (default 20)")
    p.add_argument("--mode", default="hybrid", choices=MODES, help="retrieval: dense + BM25 fused (default), or one")


def _index_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or folders (.txt, .md, .html, .pdf)")
    p.add_argument("--store", "-s", required=True, metavar="DIR|URL", help="where the index lives (made if missing)")
    p.add_argument("--tokenizer", "-t", default="cl100k_base", help="chunk sizes are counted in its tokens")
    p.add_argument("--chunk-tokens", type=int, default=256, metavar="N", help="chunk size (default 256)")
    p.add_argument("--overlap-tokens", type=int, default=32, metavar="N", help="overlap between chunks (default 32)")
    p.add_argument("--rebuild", action="store_true",
                   help="drop the store's contents and index everything again (also the fix for a damaged store)")
    p.add_argument("--max-file-bytes", type=int, default=MAX_FILE_BYTES, metavar="N",
                   help=f"skip (and report) files larger than this (default {MAX_FILE_BYTES:,}, 200 MiB)")
    p.add_argument("--lock-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="how long to wait while another edgewise index writes to the store (default 600; 0: stop at once)")
    p.add_argument("--format", "-f", default="text", choices=("text", "json"), help="json: the report on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    p.add_argument("--progress", action="store_true",
                   help="show the progress bar (chunks embedded) on stderr even when it is not a terminal; on a "
                        "terminal it shows by itself once a run takes more than 2 s")
    p.set_defaults(func=cmd_index)


def _retrieve_args(p: argparse.ArgumentParser) -> None:
    from .pack import FORMATS, report_args

    _common(p)
    p.add_argument("--format", "-f", default="text", choices=FORMATS)
    report_args(p)
    _pack_args(p)
    p.set_defaults(func=cmd_retrieve)


def _pack_args(p: argparse.ArgumentParser) -> None:
    """Every pack option; ``--prune`` with retrieve/ask's default and what pruning costs."""
    from ..options import add_arguments, option_argument

    add_arguments(p, exclude=("prune",), defaults=ASK_DEFAULTS)
    option_argument(p, "prune", "--prune", default=ASK_DEFAULTS["prune"], help=PRUNE_HELP)


def _ask_args(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--backend", default="local", choices=("local", "openai"), help="local: the bundled Gemma (extra eval)")
    p.add_argument("--base-url", default="http://127.0.0.1:8080/v1", help="the OpenAI-compatible endpoint (openai)")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the key (openai)")
    p.add_argument("--model-path", default=None, help="a GGUF model for the local backend (default: the bundled Gemma)")
    p.add_argument("--context", type=int, default=None, metavar="N",
                   help="the model's context window (default: 4096 for local, the registry's for a named model)")
    p.add_argument("--max-tokens", type=int, default=256, metavar="N", help="room left for the answer (default 256)")
    p.add_argument("--debug", action="store_true", help="also show where every retrieved chunk went")
    p.add_argument("--format", "-f", default="text", choices=("text", "json"))
    _pack_args(p)
    p.set_defaults(func=cmd_ask)


def add_commands(subparsers: Any) -> None:
    command(subparsers, "index", _index_args, help="index files or folders into a local store (extra index)")
    command(subparsers, "retrieve", _retrieve_args, help="retrieve from a store and print the packed prompt")
    command(subparsers, "ask", _ask_args, help="retrieve, pack and answer with an LLM (extras index, eval)")
