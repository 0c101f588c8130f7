"""The exact counting backends of the cl100k/o200k encodings, behind one :class:`Counter` interface:
tiktoken's own ``Encoding``, rs-bpe's precompiled tables (the default) and quicktok (the ``fast``
extra). :class:`edgewise.tokens.tokenizers.TiktokenTokenizer` counts on one of them and says which.

>>> from edgewise.tokens import get_tokenizer
>>> tok = get_tokenizer("cl100k_base")
>>> isinstance(tok.counting, Counter), tok.counting.count("hello world")
(True, 2)
"""

from __future__ import annotations

import re
from array import array
from typing import Any, Protocol, runtime_checkable

from ..compiled import module as _compiled
from ..errors import install_hint


@runtime_checkable
class Counter(Protocol):
    """An exact counting backend of one encoding: ``count`` gives the number of ids tiktoken's
    ``encode_ordinary`` gives (special-token strings are plain text, lone surrogates replaced).

    :class:`edgewise.tokens.tokenizers.TiktokenTokenizer` counts on one of three: :class:`TiktokenCounter`,
    :class:`RsBpeCounter` (the default, a core dependency) or :class:`QuickCounter` (the ``fast``
    extra, after its ``speed_up()``); its ``counting`` is the one that counts now.

    >>> RsBpeCounter(load_fast("o200k_base")).count("hello world")
    2
    """

    name: str

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        ...


class TiktokenCounter:
    """Counts with tiktoken's own ``Encoding``."""

    name = "tiktoken"

    def __init__(self, encoding: Any) -> None:
        self.encoding = encoding

    def count(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text))  # tiktoken replaces lone surrogates itself


class RsBpeCounter:
    """Counts with rs-bpe's precompiled table of the encoding (which also encodes and decodes)."""

    name = "rs-bpe"

    def __init__(self, bpe: Any) -> None:
        self.bpe = bpe

    def count(self, text: str) -> int:
        try:
            return self.bpe.count(text)  # type: ignore[no-any-return]
        except UnicodeEncodeError:  # lone surrogates: replaced, as tiktoken does
            return self.bpe.count(replace_surrogates(text))  # type: ignore[no-any-return]


#: The characters quicktok's pattern classes as letters, marks or digits where tiktoken's does not
#: (Unicode 17.0's new letters: CJK Extension J, Sidetic, Tolong Siki, Beria Erfe, Tai Yo and some
#: single letters), as (first, last) code points. Where one sits beside punctuation the two split
#: pre-tokens differently (``'\U000323b0\\x'``: 5 tokens on quicktok, 6 on tiktoken). Found by
#: comparing both counters on every code point (``tests/tokens/test_quick_counter.py``, slow tier,
#: fails when either library's tables move); the marks U+1ACF-U+1AEB matter to o200k only.
UNEQUAL = (
    (0x088F, 0x088F), (0x0C5C, 0x0C5C), (0x0CDC, 0x0CDC), (0x1ACF, 0x1ADD), (0x1AE0, 0x1AEB), (0xA7CE, 0xA7CF),
    (0xA7D2, 0xA7D2), (0xA7D4, 0xA7D4), (0xA7F1, 0xA7F1), (0x10940, 0x10959), (0x10EC5, 0x10EC7), (0x10EFA, 0x10EFB),
    (0x11B60, 0x11B67), (0x11DB0, 0x11DDB), (0x11DE0, 0x11DE9), (0x16EA0, 0x16EB8), (0x16EBB, 0x16ED3),
    (0x16FF2, 0x16FF6), (0x187F8, 0x187FF), (0x18D09, 0x18D1E), (0x18D80, 0x18DF2), (0x1E6C0, 0x1E6DE),
    (0x1E6E0, 0x1E6F5), (0x1E6FE, 0x1E6FF), (0x2B73A, 0x2B73F), (0x2CEA2, 0x2CEAD), (0x323B0, 0x33479),
)
_UNEQUAL_TABLE = array("I", [n for pair in UNEQUAL for n in pair]).tobytes()
_UNEQUAL_PAGES = bytes(any(a >> 8 <= p <= b >> 8 for a, b in UNEQUAL) for p in range(0x1100))
_UNEQUAL_CLASS = re.compile("[" + "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in UNEQUAL) + "]")


def has_unequal_py(text: str) -> bool:
    """Whether ``text`` holds a character of :data:`UNEQUAL`; ``edgewise._scan.any_in_ranges`` does it
    in C, answering a text narrower than the first range from its width alone."""
    return not text.isascii() and _UNEQUAL_CLASS.search(text) is not None


if _compiled is not None and array("I").itemsize == 4:
    def has_unequal(text: str) -> bool:
        return _compiled.any_in_ranges(text, _UNEQUAL_PAGES, _UNEQUAL_TABLE)  # type: ignore[no-any-return]
else:
    has_unequal = has_unequal_py


class QuickCounter:
    """Counts with quicktok's encoding (``pip install -e '.[fast]'``); a text holding one of
    the :data:`UNEQUAL` characters is counted by ``fallback`` (the counter it replaces), so every
    count is tiktoken's."""

    name = "quicktok"

    def __init__(self, quick: Any, fallback: Counter) -> None:
        self.quick = quick
        self.fallback = fallback

    def count(self, text: str) -> int:
        if has_unequal(text):
            return self.fallback.count(text)
        try:
            return self.quick.count(text)  # type: ignore[no-any-return]
        except (TypeError, UnicodeEncodeError):  # lone surrogates (no UTF-8 for them): replaced, as tiktoken does
            return self.quick.count(replace_surrogates(text))  # type: ignore[no-any-return]


def replace_surrogates(text: str) -> str:
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


# texts a counter must count as this tokenizer does before counting switches to it: special-token
# strings (plain text here), whitespace runs, CRLF, digits, contractions, several scripts, emoji
PROBES = (
    "", " ", "<|endoftext|>", "a <|fim_prefix|>b<|endofprompt|>", "  \r\n\t \n\n  x  ", "I'm it's we'll 12345678 3.14",
    "naïve café Straße — «ok»", "東京は日本の首都です。", "Привет, мир", "مرحبا بالعالم", "🙂👍🏽 e\u0301", "\x00\x1c\x1f\x7f",
    "<doc id=\"a\" title=\"T\">\n  text\n</doc>\n", "x" * 300, " " * 257 + "y", "\U000323b0\\x \u088f!1 \U00016ea0\\u",
)


def load_quick(name: str) -> tuple[Any, str | None]:
    """quicktok's ``name``, or None and why not."""
    try:
        import quicktok
    except ImportError:
        return None, f"quicktok is not installed: {install_hint('fast')}"
    try:
        return quicktok.get_encoding(name), None
    except Exception as exc:  # noqa: BLE001 - any failure to load leaves counting as it was, said in .counter
        return None, f"quicktok could not load {name}: {type(exc).__name__}: {exc}"


def load_fast(name: str) -> Any:
    """rs-bpe's precompiled ``name``, or None when rs-bpe is not installed or lacks it."""
    try:
        from rs_bpe.bpe import openai
    except ImportError:
        return None
    build = getattr(openai, name, None)
    return build() if build is not None else None
