"""The exact counting backends of the cl100k/o200k encodings, behind one :class:`Counter` interface:
tiktoken's own ``Encoding``, rs-bpe's precompiled tables (the default) and quicktok (the ``fast``
extra). :class:`edgewise.tokens.tokenizers.TiktokenTokenizer` counts on one of them and says which.

>>> from edgewise.tokens import get_tokenizer
>>> tok = get_tokenizer("cl100k_base")
>>> isinstance(tok.counting, Counter), tok.counting.count("hello world")
(True, 2)
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


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


class QuickCounter:
    """Counts with quicktok's encoding (``pip install 'edgewise[fast]'``)."""

    name = "quicktok"

    def __init__(self, quick: Any) -> None:
        self.quick = quick

    def count(self, text: str) -> int:
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
    "<doc id=\"a\" title=\"T\">\n  text\n</doc>\n", "x" * 300, " " * 257 + "y",
)


def load_quick(name: str) -> tuple[Any, str | None]:
    """quicktok's ``name``, or None and why not."""
    try:
        import quicktok
    except ImportError:
        return None, "quicktok is not installed: pip install 'edgewise[fast]'"
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
