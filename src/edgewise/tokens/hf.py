"""``hf:PATH``: any Hugging Face ``tokenizer.json`` as an exact tokenizer (needs ``tokenizers``)."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ConfigError
from .cache import CountCache


class HFTokenizer:
    """Any Hugging Face ``tokenizer.json`` (needs the ``tokenizers`` package): ``hf:PATH``."""

    estimated = False

    def __init__(self, path: str, *, cache_chars: int = 8_000_000) -> None:
        try:
            from tokenizers import Tokenizer as _HF
        except ImportError:
            raise ImportError(
                "hf: tokenizers need the 'tokenizers' package: pip install -e '.[hf]' (in an edgewise checkout)"
            ) from None
        try:
            self._tok = _HF.from_file(path)
        except Exception as exc:  # tokenizers raises bare Exceptions
            raise ConfigError(f"tokenizer 'hf:{path}' could not be loaded: {exc}") from None
        self._tok.no_truncation()
        self._tok.no_padding()
        self.name = f"hf:{path}"
        self._cache = CountCache(cache_chars)

    def _encode(self, text: str):  # noqa: ANN202 - tokenizers.Encoding
        return self._tok.encode(text, add_special_tokens=False)

    def count(self, text: str, *, admit: bool = True) -> int:
        return self._cache.get(text, lambda t: len(self._encode(t).ids), admit)

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        enc = self._encode(text)
        if len(enc.ids) <= max_tokens:
            return text
        prefix = text[: enc.offsets[max_tokens - 1][1]]
        while prefix and self.count(prefix) > max_tokens:
            prefix = prefix[:-1]
        return prefix

    def count_prefix(self, text: str, n_chars: int) -> int:
        return sum(1 for _, end in self._encode(text).offsets if end <= n_chars)

    def count_parts(self, parts: Sequence[str]) -> int:
        return self.count("".join(parts))
