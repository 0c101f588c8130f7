"""LLM summaries (``summaries="llm"``): a model writes the summary of each chunk past the key facts.

The candidates are the chunks :func:`edgewise.prune.summaries.summary_targets` picks (as for
extractive summaries: past the key facts, no ``meta.summary`` of their own, longer than
``summary_tokens``); of those, only the ones selection puts in as summaries are written (see
:func:`llm_summary_step`), so a chunk that goes in whole, cut or not at all costs no model call.
Each is asked of the model with :data:`PROMPT`, at temperature 0, for at most ``summary_tokens`` of
its tokens; the reply's first paragraph is the summary, cut exactly with the pack's counter to at
most ``summary_tokens`` tokens. The summary is then a chunk's summary like a given one: untrusted
text that the layout quotes. A packer runs this step through :class:`~edgewise.prune.summaries.Summarizers`,
which makes the summariser of each set of summary options once.

Replies are cached on disk, one file per key: the SHA-256 of the model's identity, the whole
summarisation prompt (instruction, question, chunk text) and ``summary_tokens``. The reply is cached
before it is cut, so packs counting with other tokenizers share it. A second pack of the same chunks
makes no model call. Writes are atomic (a temporary file renamed into place); an entry that is too
large, not JSON, or not the entry of its key is ignored and written again.

A summary that cannot be written (the backend is down, refuses the request, or is misconfigured)
fails the pack with a :class:`~edgewise.errors.BackendError` naming the backend, where it runs and
the rule: no summary is replaced by another kind in silence. ``summaries="auto"`` writes extractive
summaries without a model (:mod:`edgewise.prune.summaries.extractive`).

>>> prompt_for("Who wrote Hamlet?", "Hamlet is a tragedy by Shakespeare.", 20).splitlines()[0]
'Summarize the passage with respect to the question in at most 20 tokens: what the passage says, not what you know. Keep the summary neutral and factual.'
>>> first_paragraph("\\n\\n Paris is the capital.\\nIt is big.\\n\\nQuestion: more")
'Paris is the capital.\\nIt is big.'
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from ...chunk import Chunk
from ...errors import BackendError, ConfigError
from ...files.writing import write_atomic
from ...layout.base import quote
from ...llm.protocol import LLM, Completion
from ...tokens.tokenizers import Tokenizer
from . import summary_targets

PROMPT = (
    "Summarize the passage with respect to the question in at most {n} tokens: what the passage says, "
    "not what you know. Keep the summary neutral and factual.\n\n"
    "Question:\n{question}\n\n"
    "Passage:\n{passage}\n\n"
    "Summary:"
)
#: the environment variable naming the cache directory when ``summary_cache`` is not given
CACHE_ENV = "EDGEWISE_SUMMARY_CACHE"
#: the OpenAI-compatible endpoint of ``summary_backend="openai"`` when ``summary_base_url`` is not given
DEFAULT_BASE_URL = "http://127.0.0.1:8080/v1"
#: the largest cache entry read or written (bytes); a reply is at most ``summary_tokens`` model tokens
MAX_ENTRY_BYTES = 1 << 20
#: the version of the cache entries and of how a key is made: changing either changes it
FORMAT = 1
#: the keys of every record in ``DebugInfo.summaries``
RECORD_KEYS = ("id", "source", "backend", "model", "cache_hit", "cache_key", "tokens", "cut", "note")

T = TypeVar("T")
_PARAGRAPH_END = re.compile(r"\n[ \t\r\f\v]*\n")


def prompt_for(question: str, passage: str, n: int) -> str:
    """The summarisation prompt: the instruction, then the question and the passage, each quoted
    (every line indented), so a passage cannot start a line of its own structure."""
    return PROMPT.format(n=n, question=quote(question), passage=quote(passage))


def first_paragraph(reply: str) -> str:
    """The reply's first paragraph, without the white space around it (a completion model often
    goes on past its answer with a new ``Question:``)."""
    text = reply.lstrip()
    found = _PARAGRAPH_END.search(text)
    return (text[:found.start()] if found else text).strip()


def cut_to(text: str, n: int, tok: Tokenizer) -> str:
    """``text`` cut at a token boundary to at most ``n`` tokens counted by ``tok`` on the final string
    (without edge white space); ``""`` when nothing fits."""
    text = text.strip()
    if tok.count(text) <= n:
        return text
    for k in range(n, -1, -1):
        cut = tok.truncate(text, k).strip()
        if tok.count(cut) <= n:
            return cut
    return ""


def cache_directory(given: str | os.PathLike[str] | None = None) -> Path:
    """Where replies are cached: ``given`` (the ``summary_cache`` option), else ``$EDGEWISE_SUMMARY_CACHE``,
    else ``$XDG_CACHE_HOME/edgewise/summaries``, else ``~/.cache/edgewise/summaries``."""
    if given:
        return Path(given).expanduser()
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "edgewise" / "summaries"


def model_identity(backend: LLM) -> dict[str, Any]:
    """What names the model and its decoding in a cache key: ``describe()``, the endpoint of an HTTP
    backend and the file name and size of a local one."""
    out = dict(backend.describe())
    out.setdefault("backend", backend.name)
    out.setdefault("model", backend.model)
    base_url = getattr(backend, "base_url", None)
    if base_url is not None:
        out["base_url"] = base_url
    path = getattr(backend, "path", None)
    if path is not None:
        out["file"], out["bytes"] = Path(path).name, Path(path).stat().st_size
    return out


def cache_key(identity: dict[str, Any], prompt: str, n: int) -> str:
    """The SHA-256 (hex) of the model's identity, the prompt and the token cap."""
    data = json.dumps({"format": FORMAT, "model": identity, "prompt": prompt, "max_tokens": n},
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


class SummaryCache:
    """Model replies on disk, one JSON file per key under ``directory`` (``<key[:2]>/<key>.json``)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> tuple[str | None, bool]:
        """The cached reply of ``key`` (None when there is none) and whether an entry was there but
        unreadable: larger than :data:`MAX_ENTRY_BYTES`, not JSON, or not this key's."""
        try:
            with open(self.path(key), "rb") as f:
                data = f.read(MAX_ENTRY_BYTES + 1)
        except FileNotFoundError:
            return None, False
        except OSError:
            return None, True
        try:
            entry = json.loads(data.decode("utf-8")) if len(data) <= MAX_ENTRY_BYTES else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            entry = None
        ok = isinstance(entry, dict) and entry.get("key") == key and isinstance(entry.get("reply"), str)
        return (entry["reply"], False) if ok else (None, True)  # type: ignore[index]

    def put(self, key: str, reply: str, identity: dict[str, Any]) -> bool:
        """Store ``reply`` atomically; False when the entry would be larger than :data:`MAX_ENTRY_BYTES`."""
        data = json.dumps({"key": key, "reply": reply, "model": identity}, ensure_ascii=False).encode("utf-8")
        if len(data) > MAX_ENTRY_BYTES:
            return False
        target = self.path(key)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, data)
        except OSError as exc:
            raise ConfigError(f"summary_cache must be a writable directory, but writing {str(target)!r} failed: "
                              f"{exc.strerror or exc}; give summary_cache (or ${CACHE_ENV}) a directory you can "
                              "write") from None
        return True


@dataclass(frozen=True)
class Written:
    """One chunk's LLM summary: the text (cut to the cap) and its record for the debug info."""

    text: str
    record: dict[str, Any]


class LLMSummarizer:
    """Writes LLM summaries with ``backend``, caching the replies in ``cache``; ``where`` says where
    the backend runs (its endpoint or model file), for errors.

    >>> from edgewise.tokens.tokenizers import get_tokenizer
    >>> class Scripted:
    ...     name, model = "scripted", "fixed-reply"
    ...     def describe(self): return {"backend": "scripted", "model": "fixed-reply"}
    ...     def complete(self, prompt, *, max_tokens, stop): return Completion("\\n Paris is the capital of France.")
    >>> import tempfile
    >>> s = LLMSummarizer(Scripted(), SummaryCache(tempfile.mkdtemp()), "in-process")
    >>> chunk = Chunk("a", "Paris is the capital and largest city of France.")
    >>> [(w.text, w.record["cache_hit"], w.record["tokens"]) for w in s.summarize("capital?", [chunk], 4, get_tokenizer("cl100k_base"))]
    [('Paris is the capital', False, 4)]
    >>> [w.record["cache_hit"] for w in s.summarize("capital?", [chunk], 4, get_tokenizer("cl100k_base"))]
    [True]
    """

    def __init__(self, backend: LLM, cache: SummaryCache, where: str) -> None:
        self.backend, self.cache, self.where = backend, cache, where
        self._identity: dict[str, Any] | None = None

    @property
    def identity(self) -> dict[str, Any]:
        if self._identity is None:
            self._identity = model_identity(self.backend)
        return self._identity

    def summarize(self, query: str, chunks: Sequence[Chunk], n: int, tok: Tokenizer) -> list[Written]:
        """One :class:`Written` per chunk, in order: cached replies first, then the model's, asked
        ``concurrency`` at a time (an HTTP backend) or one by one (a local model)."""
        prompts = [prompt_for(query, c.text, n) for c in chunks]
        keys = [cache_key(self.identity, p, n) for p in prompts]
        found = [self.cache.get(k) for k in keys]
        todo = [i for i, (reply, _) in enumerate(found) if reply is None]
        workers = max(1, min(int(getattr(self.backend, "concurrency", 1) or 1), len(todo)))
        ask = lambda i: self._ask(chunks[i], prompts[i], n)  # noqa: E731
        if workers > 1:
            with ThreadPoolExecutor(workers, thread_name_prefix="edgewise-summary") as pool:
                replies = dict(zip(todo, pool.map(ask, todo)))
        else:
            replies = {i: ask(i) for i in todo}
        out = []
        for i, chunk in enumerate(chunks):
            reply, corrupt = found[i]
            note = "corrupt cache entry replaced" if corrupt else None
            if i in replies:
                reply = replies[i]
                if not self.cache.put(keys[i], reply, self.identity):
                    note = "reply too large to cache"
            out.append(self._written(chunk, reply, keys[i], i not in replies, note, n, tok))  # type: ignore[arg-type]
        return out

    def _ask(self, chunk: Chunk, prompt: str, n: int) -> str:
        try:
            done: Completion = self.backend.complete(prompt, max_tokens=n, stop=())
        except (BackendError, OSError, http.client.HTTPException) as exc:
            raise BackendError(
                f"summaries='llm' needs a summary of chunk {chunk.id!r} from summary_backend "
                f"{self.backend.name!r} ({self.where}), but it failed: {exc}. A summary that cannot be written "
                "fails the pack: start the backend or fix summary_base_url / summary_model, or use "
                "summaries='auto' for extractive summaries"
            ) from None
        text = getattr(done, "text", None)
        if not isinstance(text, str):
            raise BackendError(f"summary_backend {self.backend.name!r} ({self.where}) must return a completion with "
                               f"a text, but got {type(done).__name__}")
        return text

    def _written(self, chunk: Chunk, reply: str, key: str, hit: bool, note: str | None, n: int,
                 tok: Tokenizer) -> Written:
        paragraph = first_paragraph(reply)
        text = cut_to(paragraph, n, tok)
        if not text:
            note = "the model's reply is empty: no summary" if note is None else note + "; the reply is empty: no summary"
        record = {"id": chunk.id, "source": "llm", "backend": self.backend.name, "model": self.backend.model,
                  "cache_hit": hit, "cache_key": key, "tokens": tok.count(text) if text else 0,
                  "cut": text != paragraph, "note": note}
        return Written(text, record)


def check_backend(spec: Any, *, model: str | None, base_url: str | None) -> None:
    """Refuse summary options that cannot work, before any model loads: an unknown backend, an
    endpoint for the local backend or one that is not HTTP, a local model file that does not exist."""
    if not isinstance(spec, str):
        if not (callable(getattr(spec, "complete", None)) and callable(getattr(spec, "describe", None))):
            raise ConfigError(f"summary_backend must be 'local', 'openai' or an object with complete() and describe(), "
                              f"but got {type(spec).__name__}")
    elif spec == "local":
        if base_url is not None:
            raise ConfigError(f"summary_base_url names the endpoint of summary_backend 'openai', but summary_backend is "
                              f"'local'; drop summary_base_url {base_url!r} or use summary_backend='openai'")
        if model is not None and not Path(model).is_file():
            raise ConfigError(f"summary_model of summary_backend 'local' must be an existing GGUF file, but {model!r} "
                              "is not a file; give its path, or no summary_model for the bundled Gemma 3 270M")
    elif spec == "openai":
        if base_url is not None and not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"summary_base_url must start with http:// or https://, but got {base_url!r}")
    else:
        raise ConfigError(f"summary_backend must be 'local' or 'openai', but got {spec!r}")


def make_backend(spec: Any, *, model: str | None, base_url: str | None, api: str) -> tuple[LLM, str]:
    """The backend ``summary_backend`` names (checked by :func:`check_backend`), and where it runs
    (for errors): ``local`` (a GGUF file, by default the bundled Gemma 3 270M, in-process) or
    ``openai`` (an OpenAI-compatible endpoint); from Python, an object with ``complete()`` and
    ``describe()`` is used as it is."""
    check_backend(spec, model=model, base_url=base_url)
    if not isinstance(spec, str):
        return spec, str(getattr(spec, "base_url", None) or getattr(spec, "path", None) or type(spec).__name__)
    if spec == "local":
        from ...llm.local import LocalBackend

        try:
            backend = LocalBackend(model, api=api)
        except ImportError as exc:
            raise ImportError(f"summaries='llm' with summary_backend 'local': {exc}; or use summary_backend='openai'") from None
        return backend, str(backend.path)
    from ...llm.openai import OpenAIBackend

    # a pack waits for its summaries: two retries, not the evaluation's five
    backend = OpenAIBackend(base_url or DEFAULT_BASE_URL, model or "default", api=api, retries=2, backoff=0.5, timeout=60.0)
    return backend, backend.base_url


def make_summarizer(spec: Any, *, model: str | None, base_url: str | None, api: str,
                    cache: str | None) -> LLMSummarizer:
    """The summariser the options name (see :func:`make_backend` and :func:`cache_directory`)."""
    backend, where = make_backend(spec, model=model, base_url=base_url, api=api)
    return LLMSummarizer(backend, SummaryCache(cache_directory(cache)), where)


def placeholder(n: int, tok: Tokenizer) -> str:
    """A stand-in summary of ``n`` tokens (by ``tok``): as long as a written one may be, so selection
    with it places a chunk's summary only where the real one fits too."""
    return tok.truncate(" ".join(["summary"] * (n + 1)), n)


def with_summaries(chunks: Sequence[Chunk], summaries: dict[int, str]) -> list[Chunk]:
    """``chunks`` with ``summaries[i]`` as the LLM summary of chunk ``i`` (an empty one: none)."""
    out = list(chunks)
    for i, text in summaries.items():
        if text:
            out[i] = replace(chunks[i], meta={**chunks[i].meta, "summary": text, "summary_source": "llm"})
    return out


def llm_summary_step(query: str, chunks: Sequence[Chunk], *, skip: int, max_tokens: int, tok: Tokenizer,
                     summarizer: Callable[[], LLMSummarizer], budget: int | None,
                     select: Callable[[Sequence[Chunk]], tuple[T, set[str]]]) -> tuple[T, list[dict[str, Any]]]:
    """Select with LLM summaries written for the chunks selection puts in as summaries, and one record
    per summary written, in rank order.

    ``select(chunks)`` fits the chunks under the budget and gives its result and the ids it placed as
    their summary. Each chunk that :func:`~edgewise.prune.summaries.summary_targets` picks goes to
    selection first with a :func:`placeholder` of ``max_tokens`` tokens; those selection places as
    summaries are written (all of one round at once), and selection runs again with them, until it
    places no placeholder. The result is selection's with the written summaries alone. So a chunk
    that selection puts in whole, cuts or drops costs no model call, and only those that fit as
    summaries are asked for. An empty reply leaves its chunk without a summary (its record says so).
    Without a ``budget`` every chunk goes in whole: no summary is asked for. ``summarizer()`` gives
    the summariser, called only when a chunk needs a summary (a local model loads then).
    """
    todo = summary_targets(chunks, skip=skip, max_tokens=max_tokens, tok=tok) if budget is not None else []
    written: dict[int, Written] = {}
    if todo:
        stand_in = placeholder(max_tokens, tok)
        while True:
            trial = {i: written[i].text if i in written else stand_in for i in todo}
            result, short = select(with_summaries(chunks, trial))
            need = [i for i in todo if i not in written and chunks[i].id in short]
            if not need:
                break
            written.update(zip(need, summarizer().summarize(query, [chunks[i] for i in need], max_tokens, tok)))
        if len(written) == len(todo):  # the last selection had no placeholder: it is the result
            return result, [written[i].record for i in sorted(written)]
    result, _ = select(with_summaries(chunks, {i: w.text for i, w in written.items()}))
    return result, [written[i].record for i in sorted(written)]
