"""``edgewise ask --backend openai`` reads a bounded reply: an upstream that ignores ``max_tokens``
and sends 50 MB gets a clean error naming the limit and the upstream, not 50 MB printed.

The upstream is the loopback fake of ``tests/proxy_upstream.py``: model ``text-{bytes}`` answers with
that many bytes of text, made piece by piece and sent chunked (no length up front), and
``big-{bytes}`` with a reply that declares its length. ``edgewise ask`` runs as a subprocess against
a store of the bundled documents, and its peak memory is its own ``ru_maxrss`` (``os.wait4``). The
reply limit itself (:func:`edgewise.llm.openai.reply_byte_limit`) and the token check are held on
``OpenAIBackend`` directly, without a store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgewise.errors import BackendError
from edgewise.llm.openai import (
    COMPLETION_TOKEN_SLACK,
    MAX_CHARS_PER_TOKEN,
    REPLY_BYTES_PER_TOKEN,
    REPLY_ENVELOPE_BYTES,
    OpenAIBackend,
    reply_byte_limit,
)

from ..conftest import ROOT
from ..proxy_upstream import FakeOpenAI

MB = 1024 * 1024
QUESTION = "How old must a senator be?"
MAX_TOKENS = 256


@pytest.fixture(scope="module")
def upstream():
    with FakeOpenAI() as fake:
        yield fake


# -- the client, no store ----------------------------------------------------------------------------

def test_the_byte_limit_follows_from_max_tokens():
    assert reply_byte_limit(MAX_TOKENS) == REPLY_ENVELOPE_BYTES + REPLY_BYTES_PER_TOKEN * MAX_TOKENS < 2 * MB


@pytest.mark.parametrize("model", [f"text-{50 * MB}", f"big-{50 * MB}"], ids=["chunked", "content-length"])
def test_a_reply_past_the_limit_is_refused_naming_it_and_the_upstream(upstream, model):
    backend = OpenAIBackend(upstream.url, model, api="chat", retries=3, sleep=lambda _: None)
    n = len(upstream.seen)
    with pytest.raises(BackendError) as info:
        backend.complete("hi", max_tokens=MAX_TOKENS, stop=[])
    message = str(info.value)
    assert message.startswith(f"{upstream.url}/chat/completions answered with a reply over the limit of "
                              f"{reply_byte_limit(MAX_TOKENS)} bytes")
    assert "did not keep to max_tokens" in message
    assert len(upstream.seen) == n + 1  # not retried: the same request would get the same reply


def test_a_reply_within_the_limit_is_read(upstream):
    out = OpenAIBackend(upstream.url, "text-3000", api="chat").complete("hi", max_tokens=MAX_TOKENS, stop=[])
    assert len(out.text) == 3000 and out.text.startswith("la la")


class _Reply:
    """What ``urlopen`` gives: a readable body with headers."""

    def __init__(self, payload: dict) -> None:
        import io

        self.body = io.BytesIO(json.dumps(payload).encode())
        self.headers = {}

    def read(self, n: int = -1) -> bytes:
        return self.body.read(n)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _complete(monkeypatch, payload: dict, max_tokens: int):
    import urllib.request

    monkeypatch.setattr(urllib.request, "urlopen", lambda req, timeout: _Reply(payload))
    return OpenAIBackend("http://127.0.0.1:9/v1", "m", api="chat").complete("hi", max_tokens=max_tokens, stop=[])


def test_the_completion_tokens_are_held_to_max_tokens(monkeypatch):
    def reply(tokens: int, text: str = "Paris") -> dict:
        return {"choices": [{"message": {"content": text}}], "usage": {"prompt_tokens": 5, "completion_tokens": tokens}}

    assert _complete(monkeypatch, reply(10 + COMPLETION_TOKEN_SLACK), 10).completion_tokens == 10 + COMPLETION_TOKEN_SLACK
    with pytest.raises(BackendError, match=r"answered with 27 completion tokens \(usage.completion_tokens\), but "
                                           r"max_tokens was 10 \(at most 26 are taken\)"):
        _complete(monkeypatch, reply(11 + COMPLETION_TOKEN_SLACK), 10)
    # without a count of its own, the text's length: no token carries more than MAX_CHARS_PER_TOKEN characters
    most = MAX_CHARS_PER_TOKEN * (10 + COMPLETION_TOKEN_SLACK)
    no_usage = {"choices": [{"message": {"content": "x" * most}}]}
    assert len(_complete(monkeypatch, no_usage, 10).text) == most
    with pytest.raises(BackendError, match=f"answered with {most + 1} characters of text, more than 10 tokens can hold"):
        _complete(monkeypatch, {"choices": [{"message": {"content": "x" * (most + 1)}}]}, 10)


# -- edgewise ask, end to end -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    pytest.importorskip("lancedb", reason="needs the index extra: pip install -e '.[index]'")
    pytest.importorskip("onnxruntime", reason="needs the models extra (the index embeds with MiniLM)")
    from edgewise.index import index_paths

    path = tmp_path_factory.mktemp("ask-bounds") / "store"
    index_paths([ROOT / "examples" / "docs"], path)
    return path


def ask(store: Path, url: str, model: str, tmp: Path) -> tuple[int, float, int, str]:
    """``edgewise ask`` through ``url``: its exit status, its peak memory in MB (its own ru_maxrss),
    the bytes it printed, and its stderr."""
    out, err = tmp / f"{model}.out", tmp / f"{model}.err"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "edgewise", "ask", QUESTION, "--store", str(store),
                                 "--backend", "openai", "--base-url", url, "--model", model, "--context", "4096",
                                 "--max-tokens", str(MAX_TOKENS)], stdout=stdout, stderr=stderr)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss / 1024, out.stat().st_size, err.read_text()


@pytest.mark.models
def test_ask_refuses_a_50_mb_reply_cleanly_in_bounded_memory(store, upstream, tmp_path):
    # the same command with a small answer: what ask needs anyway (the store, the embedding model...)
    status, baseline, printed, said = ask(store, upstream.url, "text-300", tmp_path)
    assert status == 0, said
    assert 300 < printed < 10_000

    status, peak, printed, said = ask(store, upstream.url, f"text-{50 * MB}", tmp_path)
    limit = reply_byte_limit(MAX_TOKENS)
    assert status == 2
    assert said.strip().splitlines()[-1] == (
        f"edgewise: error: {upstream.url}/chat/completions answered with a reply over the limit of {limit} bytes: it "
        f"sent more. The limit follows from max_tokens ({REPLY_ENVELOPE_BYTES} bytes of envelope + "
        f"{REPLY_BYTES_PER_TOKEN} bytes a token); a reply that large means the upstream did not keep to max_tokens")
    assert printed == 0  # nothing of the 50 MB reached stdout
    # read whole, the 50 MB reply took ask to ~600 MB against ~480 MB for a small answer (the store and
    # the embedding model are most of it); bounded, the two are the same
    assert peak < baseline + 40, f"ask peaked at {peak:.0f} MB, {peak - baseline:.0f} MB over a small answer's"

    status, _, printed, said = ask(store, upstream.url, f"big-{50 * MB}", tmp_path)  # a declared length: not read
    assert (status, printed) == (2, 0)
    assert f"it declares {50 * MB} bytes (Content-Length)" in said
