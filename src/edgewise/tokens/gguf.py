"""``gguf:PATH``: the exact tokenizer of a GGUF model, read by llama.cpp (needs llama-cpp-python).

Only the vocabulary is loaded (llama-cpp-python's ``vocab_only`` mode: no weights, ~0.6 s of CPU
for Gemma 3's 262k-token vocabulary), and text is tokenized the way llama.cpp tokenizes a prompt
(no BOS, special-token strings in the text encoded as plain text), so a budget counted with it is
the budget the local model sees. ``tests/tokens/test_gguf.py`` holds the counts to a full llama.cpp model's.
"""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import io
import re
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path

from ..errors import ConfigError, missing_extra
from .cache import CountCache


class GGUFTokenizer:
    """The tokenizer inside a GGUF file: ``gguf:PATH`` (see :func:`edgewise.get_tokenizer`)."""

    estimated = False

    def __init__(self, path: str, *, cache_chars: int = 8_000_000) -> None:
        try:
            import llama_cpp
        except ImportError:
            raise missing_extra("the gguf: tokenizer", "llama-cpp-python", "eval") from None
        self.name = f"gguf:{path}"
        file = Path(path)
        if not path or not file.is_file():
            raise ConfigError(f"tokenizer {self.name!r}: PATH must be an existing GGUF file, but {path!r} is not a file")
        log = io.StringIO()
        try:  # llama.cpp logs a context warning even with verbose=False: keep it for the error, if any
            with _LOAD_LOCK, contextlib.redirect_stderr(log):
                self._llama = llama_cpp.Llama(model_path=str(file), vocab_only=True, verbose=False)
        except (ValueError, RuntimeError, OSError) as exc:
            said = " ".join(log.getvalue().split())[-300:]
            raise ConfigError(f"tokenizer {self.name!r} could not be loaded: {exc}" + (f" ({said})" if said else "")) from None
        # closed with the tokenizer, or at exit while modules still exist (llama-cpp-python's own
        # __del__ fails at interpreter shutdown and prints a traceback)
        weakref.finalize(self, self._llama.close)
        self._lib = llama_cpp
        self._vocab = llama_cpp.llama_model_get_vocab(self._llama.model)
        self._pieces: dict[int, bytes] = {}
        self._cache = CountCache(cache_chars)

    # -- llama.cpp --------------------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """Token ids, as ``Llama.tokenize(text.encode(), add_bos=False, special=False)`` gives them."""
        return self._tokenize(_utf8(text))

    def _tokenize(self, data: bytes) -> list[int]:
        size = len(data) + 8  # a token covers at least one byte; room for a prefix the model adds
        buf = (self._lib.llama_token * size)()
        n = self._lib.llama_tokenize(self._vocab, data, len(data), buf, size, False, False)
        if n < 0:  # more tokens than room (not seen; the call says how many)
            size = -n
            buf = (self._lib.llama_token * size)()
            n = self._lib.llama_tokenize(self._vocab, data, len(data), buf, size, False, False)
            if n < 0:
                raise ConfigError(f"tokenizer {self.name!r} could not tokenize {len(data)} bytes (llama.cpp said {n})")
        return list(buf[:n])

    def piece(self, token: int) -> bytes:
        """The bytes of one token. (llama-cpp-python's ``detokenize`` returns nothing for a piece over
        32 bytes, and Gemma 3 has 379 of them, so this asks llama.cpp with a buffer that fits.)"""
        found = self._pieces.get(token)
        if found is None:
            size = 64
            while True:
                buf = ctypes.create_string_buffer(size)
                n = self._lib.llama_token_to_piece(self._vocab, token, buf, size, 0, False)
                if n >= 0:
                    break
                size = -n
            found = self._pieces.setdefault(token, buf.raw[:n])
        return found

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        return b"".join(self.piece(t) for t in ids)

    @property
    def context_length(self) -> int | None:
        """The context length the GGUF declares (``<arch>.context_length``), if it does."""
        meta = self._llama.metadata
        value = meta.get(f"{meta.get('general.architecture', '')}.context_length")
        return int(value) if value is not None and str(value).isdigit() else None

    # -- the Tokenizer protocol -------------------------------------------------------------------

    def count(self, text: str, *, admit: bool = True) -> int:
        return self._cache.get(text, lambda t: len(self.encode(t)), admit)

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        data = _utf8(text)
        ids = self._tokenize(data)
        if len(ids) <= max_tokens:
            return text
        ends = self._byte_ends(data, ids)
        if ends is not None:
            prefix = text[: _chars_in(data, ends[max_tokens - 1])]
        else:  # pieces that do not spell the text: the longest prefix that counts within max_tokens
            lo, hi = 0, len(text)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if self.count(text[:mid], admit=False) <= max_tokens else (lo, mid - 1)
            prefix = text[:lo]
        while prefix and self.count(prefix) > max_tokens:  # a prefix may, rarely, tokenize into more
            prefix = prefix[:-1]
        return prefix

    def count_prefix(self, text: str, n_chars: int) -> int:
        if n_chars <= 0:
            return 0
        data = _utf8(text)
        ids = self._tokenize(data)
        limit = len(_utf8(text[:n_chars]))
        ends = self._byte_ends(data, ids)
        if ends is None:
            return min(len(ids), self.count(text[:n_chars], admit=False))
        return bisect.bisect_right(ends, limit)

    def count_parts(self, parts: Sequence[str]) -> int:
        return self.count("".join(parts))

    def _byte_ends(self, data: bytes, ids: list[int]) -> list[int] | None:
        """Where each token ends in ``data``, or None when the pieces do not spell ``data`` (a model
        that adds a leading space has it taken off the first piece)."""
        ends, pos = [], 0
        for i, token in enumerate(ids):
            piece = self.piece(token)
            if i == 0 and piece[:1] == b" " and data[:1] != b" ":
                piece = piece[1:]
            if data[pos:pos + len(piece)] != piece:
                return None
            pos += len(piece)
            ends.append(pos)
        return ends if pos == len(data) else None


_SURROGATE = re.compile("[\ud800-\udfff]")
_LOAD_LOCK = threading.Lock()  # one load at a time: stderr is redirected while llama.cpp loads


def _utf8(text: str) -> bytes:
    """UTF-8, with each surrogate code point replaced by U+FFFD: one character for one, so character
    offsets into ``text`` stay offsets into what was tokenized."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text).encode("utf-8")


def _chars_in(data: bytes, n_bytes: int) -> int:
    """How many whole characters the first ``n_bytes`` of ``data`` hold."""
    return len(data[:n_bytes].decode("utf-8", errors="ignore"))

