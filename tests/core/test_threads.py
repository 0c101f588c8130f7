"""Many threads at once: the token-count cache, pack(), the model and file caches.

Each stress test runs 16 threads released together by a barrier, with Python switching threads
far more often than usual, so that two threads missing on the same text (the race that once
drifted the cache's character count until ``popitem`` raised ``KeyError('dictionary is empty')``)
happens many times a run.
"""

import random
import sys
import threading
import time
from contextlib import contextmanager

import pytest

from edgewise import files, get_scorer, get_tokenizer, pack
from edgewise.tokens.tokenizers import TiktokenTokenizer

THREADS = 16


@contextmanager
def fast_switching():
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def run_threads(work, n=THREADS):
    """Run ``work(i)`` in ``n`` threads started together; return (results by thread, errors)."""
    barrier = threading.Barrier(n)
    results, errors = [None] * n, []

    def target(i):
        barrier.wait()
        try:
            results[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - every failure is collected and asserted on
            errors.append(repr(exc))

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    with fast_switching():
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return results, errors


def words(seed, n):
    rng = random.Random(seed)
    return " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "Paris", "1987", "x\n", "🤖"]) for _ in range(n))


@pytest.fixture(scope="module")
def tiny_cache_tokenizer():
    # 3,000 characters of cache: texts up to 750 characters are cached, and evicted constantly
    return TiktokenTokenizer("cl100k_base", cache_chars=3_000)


def test_count_cache_gives_exact_counts_and_keeps_its_accounting_under_16_threads(tiny_cache_tokenizer):
    tok = tiny_cache_tokenizer
    texts = [words(i, 20 + i % 120) for i in range(120)]
    expected = [len(tok.encoding.encode_ordinary(t)) for t in texts]

    def work(i):
        order = list(range(len(texts))) * 6
        random.Random(i % 4).shuffle(order)  # groups of four threads walk the same order: same-text misses
        return {j: tok.count(texts[j]) for j in order}

    results, errors = run_threads(work)
    assert errors == []
    assert results == [dict(enumerate(expected))] * THREADS
    cache = tok._cache
    stats = cache.stats()
    assert stats["chars"] == sum(len(t) for t in cache._data) <= 3_000
    assert stats["texts"] == len(cache._data)
    assert stats["hits"] + stats["misses"] == THREADS * 6 * len(texts)


def test_pack_from_16_threads_with_a_tiny_count_cache_matches_one_thread(tiny_cache_tokenizer):
    chunks = [{"id": f"c{i}", "text": words(100 + i, 150 + 10 * i), "score": 1 - i / 40} for i in range(24)]
    requests = [dict(budget=b, layout=lay) for b in (900, 2500) for lay in ("sections", "paper")]
    reference = get_tokenizer("cl100k_base")  # the shared one, with its large cache: counted one at a time
    expected = [pack("Where is Paris?", chunks, tokenizer=reference, **r).to_dict() for r in requests]

    def work(i):
        out = []
        for k in range(3):
            r = (i + k) % len(requests)
            out.append((r, pack("Where is Paris?", chunks, tokenizer=tiny_cache_tokenizer, **requests[r]).to_dict()))
        return out

    results, errors = run_threads(work)
    assert errors == []
    for per_thread in results:
        for r, got in per_thread:
            got["debug_info"]["tokenizer"] = expected[r]["debug_info"]["tokenizer"]  # same encoding, two objects
            assert got == expected[r]


def test_the_cross_encoder_cache_builds_one_scorer_per_path(tmp_path, monkeypatch):
    from edgewise.score import cross

    model = tmp_path / "cross-model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"")  # found, never loaded: building a scorer only checks the path
    find_model = cross.find_model

    def slow_disk(path):  # a slow file system: every thread is inside the check at once
        time.sleep(0.02)
        return find_model(path)

    monkeypatch.setattr(cross, "find_model", slow_disk)
    results, errors = run_threads(lambda i: get_scorer(f"cross:{model}"))
    assert errors == []
    assert len({id(s) for s in results}) == 1


def test_a_file_is_parsed_once_when_16_threads_load_it_together(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text("[0.9, 0.5, 0.8]")
    calls = []

    def parse(text):
        calls.append(text)
        return [float(x) for x in text.strip("[]").split(",")]

    results, errors = run_threads(lambda i: files.load_cached(str(path), parse))
    assert errors == []
    assert calls == ["[0.9, 0.5, 0.8]"]
    assert all(r is results[0] for r in results) and results[0] == [0.9, 0.5, 0.8]
