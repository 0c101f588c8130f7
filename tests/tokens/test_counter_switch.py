"""When counting switches to quicktok: only at a moment the caller chooses (``speed_up()``, a
``Packer``'s construction), never by itself and never inside a ``pack()`` call; a pack counts
with the counter it started with, whatever another thread switches meanwhile; the counts, and so
the packs, are the same either way.

quicktok comes with the ``fast`` extra, which ``make test`` installs: without it (a core-only
install) these tests are skipped.
"""

from __future__ import annotations

import gzip
import json
import threading

import pytest

import edgewise
import edgewise.tokens.tokenizers as tokens
from edgewise.packing.packer import Packer
from edgewise.tokens.tokenizers import TiktokenTokenizer

from ..conftest import DATA

pytest.importorskip("quicktok", reason="needs quicktok: pip install -e '.[fast]'")


def nq_requests(n: int) -> list[tuple[str, list[dict[str, object]]]]:
    """``n`` requests of 20 distinct NQ passages each, with their questions."""
    with gzip.open(DATA / "nq-open-oracle-dev.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line, _ in zip(f, range(n))]
    return [(r["question"], [{"id": f"r{k}d{i}", "title": c["title"], "text": c["text"], "score": 1.0 / (i + 1)}
                             for i, c in enumerate(r["ctxs"][:20])]) for k, r in enumerate(rows)]


def recording_load(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every load of quicktok (the encoding's name), loading the real one."""
    calls: list[str] = []
    real = tokens._load_quick
    monkeypatch.setattr(tokens, "_load_quick", lambda name: calls.append(name) or real(name))
    return calls


def test_a_pack_counts_with_the_counter_it_started_with(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another thread switches the shared tokenizer to quicktok in the middle of a pack (on its
    third count): every count of that pack is still rs-bpe's, the next pack's are all quicktok's,
    and both packs are the same."""
    real, why = tokens._load_quick("cl100k_base")
    assert why is None, why
    caller = threading.get_ident()
    used: list[str] = []

    class RecordedQuick:  # quicktok, recording the counts made by the packing thread
        def count(self, text: str) -> int:
            if threading.get_ident() == caller:
                used.append("quicktok")
            return real.count(text)  # type: ignore[no-any-return]

    monkeypatch.setattr(tokens, "_load_quick", lambda name: (RecordedQuick(), None))
    tok = TiktokenTokenizer("cl100k_base")
    rs_bpe = tok._count_one

    def recorded_rs_bpe(text: str) -> int:
        used.append("rs-bpe")
        if used.count("rs-bpe") == 3:  # mid-pack: another thread switches, and is done before this count ends
            switcher = threading.Thread(target=tok.speed_up)
            switcher.start()
            switcher.join()
            assert tok.counter == "quicktok"
        return rs_bpe(text)

    tok._count_one = recorded_rs_bpe  # type: ignore[method-assign]
    (query, chunks), = nq_requests(1)
    first = edgewise.pack(query, chunks, tokenizer=tok, budget=2000)
    during, used[:] = list(used), []
    tok._cache.clear()  # the second pack counts afresh, on what the switch left
    second = edgewise.pack(query, chunks, tokenizer=tok, budget=2000)
    assert len(during) > 3 and during == ["rs-bpe"] * len(during)
    assert len(used) > 3 and used == ["quicktok"] * len(used)
    assert (first.prompt, first.debug_info.to_dict()) == (second.prompt, second.debug_info.to_dict())


def test_counting_never_switches_by_itself_however_much_a_process_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Packs counting 5.4 M characters of fresh text load nothing and stay on rs-bpe: no amount of
    counting loads quicktok inside a pack."""
    calls = recording_load(monkeypatch)
    tok = TiktokenTokenizer("cl100k_base", cache_chars=0)
    seen = 0
    for k in range(4):
        chunks = [{"id": f"c{i}", "text": f"request {k} chunk {i} " + "word " * 13_000, "score": 1 - i / 40}
                  for i in range(20)]
        packed = edgewise.pack("which word?", chunks, tokenizer=tok, budget=400_000)
        assert [c["reason"] for c in packed.debug_info.to_dict()["chunks"]] == ["fits whole"] * 20
        seen += sum(len(c["text"]) for c in chunks)
    assert seen > 5_000_000
    assert (calls, tok.counter) == ([], "rs-bpe")


def test_a_packer_switches_when_it_is_constructed_and_its_packs_load_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = recording_load(monkeypatch)
    tok = TiktokenTokenizer("cl100k_base")
    packer = Packer(tokenizer=tok, budget=1500)
    assert (calls, tok.counter) == (["cl100k_base"], "quicktok")  # at construction, before any pack
    lazy_tok = TiktokenTokenizer("cl100k_base")
    lazy = Packer(tokenizer=lazy_tok, budget=1500, preload=False)  # resolved by its first pack, as edgewise.pack is
    for query, chunks in nq_requests(3):
        packer.pack(query, chunks)
        lazy.pack(query, chunks)
    assert (calls, tok.counter, lazy_tok.counter) == (["cl100k_base"], "quicktok", "rs-bpe")
    assert lazy_tok.speed_up() is True and calls == ["cl100k_base"] * 2


def test_each_exact_backend_is_a_counter_and_counts_what_tiktoken_counts() -> None:
    tok = TiktokenTokenizer("o200k_base")
    quick, why = tokens._load_quick("o200k_base")
    assert why is None, why
    backends = [tokens.TiktokenCounter(tok.encoding), tokens.RsBpeCounter(tok._fast), tokens.QuickCounter(quick, tokens.RsBpeCounter(tok._fast))]
    assert [b.name for b in backends if isinstance(b, tokens.Counter)] == ["tiktoken", "rs-bpe", "quicktok"]
    texts = ["", "hello world", "a\ud800b", "東京 🙂 <|endoftext|>", "  \r\n\t x" * 9, *tokens._PROBES]
    want = [len(tok.encoding.encode_ordinary(t)) for t in texts]
    assert [[b.count(t) for t in texts] for b in backends] == [want] * 3
    assert tok.counting.name == "rs-bpe" and tok.speed_up() and tok.counting.name == "quicktok"


def test_a_pinned_view_shares_the_cache_and_keeps_its_counter() -> None:
    tok = TiktokenTokenizer("cl100k_base")
    view = tok.pinned()
    assert view.count("one two three") == 3 and tok._cache.stats()["texts"] == 1  # one cache for both
    assert view.speed_up() is True  # switches the tokenizer it was taken from
    assert (tok.counter, view.counter, tok.pinned().counter) == ("quicktok", "rs-bpe", "quicktok")
    assert view.encoding is tok.encoding  # tiktoken's Encoding built once, for both
    assert view.truncate("one two three four", 2) == tok.truncate("one two three four", 2) == "one two"
