"""Exact token counting: one ``Tokenizer`` interface over tiktoken's encodings and their faster exact
counters (rs-bpe, quicktok), Hugging Face and GGUF vocabularies, and the word and character estimators.

- :mod:`~edgewise.tokens.tokenizers`: the ``Tokenizer`` protocol, the registry, ``get_tokenizer``;
- :mod:`~edgewise.tokens.counters`: the exact counting backends behind one ``Counter`` interface;
- :mod:`~edgewise.tokens.encodings`: tiktoken's encodings loaded offline, from a verified cache;
- :mod:`~edgewise.tokens.cache`: counts of texts seen before, and prefix cuts;
- :mod:`~edgewise.tokens.hf`, :mod:`~edgewise.tokens.gguf`: vocabularies shipped in packages;
- :mod:`~edgewise.tokens.wordbound`, :mod:`~edgewise.compiled`: a lower bound on a text's tokens
  from its words, and the optional compiled scan that computes it.

>>> from edgewise.tokens import get_tokenizer
>>> get_tokenizer("cl100k_base").count("hello world")
2
"""

from .tokenizers import (
    CharsEstimator,
    TiktokenTokenizer,
    Tokenizer,
    WordsEstimator,
    get_tokenizer,
    register_tokenizer,
    tokenizer_names,
)

__all__ = ["CharsEstimator", "TiktokenTokenizer", "Tokenizer", "WordsEstimator", "get_tokenizer",
           "register_tokenizer", "tokenizer_names"]
