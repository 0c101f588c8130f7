"""A chunk pruning cut says so wherever its outcome is reported: its ``DebugInfo.chunks`` record (the
reason, and a ``pruned`` key holding its ``DebugInfo.pruned`` record), the ``--table`` line, and the
one-line note on stderr of a prompt printed without its record. A chunk pruning left whole, and every
chunk of a pack without ``prune``, reads as before ("fits whole", the keys of ``CHUNK_KEYS``)."""

from __future__ import annotations

import json

import pytest

from edgewise import pack
from edgewise.cli import main
from edgewise.cli.pack import notes, table
from edgewise.packing.debug import CHUNK_KEYS, PRUNED_KEY

QUERY = "What is the capital of France?"
FR = "Paris is the capital of France. Bananas are yellow and grow in bunches. The sea is salty."
LONG = "The capital of France is Paris" + ", and Paris is large" * 40 + ". Bananas are yellow."
CHUNKS = [{"id": "fr", "text": FR, "score": 0.9}, {"id": "lyon", "text": "Lyon is a city.", "score": 0.5}]
SCORE = 0.549256  # FR's best sentence, by the lexical head
PRUNE = {"prune": 0.3, "prune_scorer": "lexical", "tokenizer": "words", "layout": "paper"}
FLAGS = ("--prune", "0.3", "--prune-scorer", "lexical", "-t", "words", "--layout", "paper")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def chunks_file(tmp_path):
    path = tmp_path / "chunks.json"
    path.write_text(json.dumps(CHUNKS))
    return str(path)


def test_a_pruned_chunk_says_so_in_its_record_the_table_and_the_stderr_note(capsys, chunks_file):
    packed = pack(QUERY, CHUNKS, **PRUNE)
    d = packed.debug_info
    assert d.pruned == [{"id": "fr", "original_chars": 89, "kept_chars": 31, "score": SCORE}]
    assert d.chunks == [
        {"id": "fr", "input_index": 0, "rank": 0, "score": 0.9, "outcome": "placed",
         "reason": "pruned to 31 of 89 characters, fits", "position": 0, "section": "documents", "tokens": 12,
         "merged_into": None, "pruned": {"original_chars": 89, "kept_chars": 31, "score": SCORE}},
        {"id": "lyon", "input_index": 1, "rank": 1, "score": 0.5, "outcome": "placed", "reason": "fits whole",
         "position": 1, "section": "documents", "tokens": 10, "merged_into": None},
    ]
    assert [tuple(r) for r in d.chunks] == [(*CHUNK_KEYS, PRUNED_KEY), CHUNK_KEYS]
    assert "Paris is the capital of France." in packed.prompt and "Bananas" not in packed.prompt

    lines = table(packed).splitlines()
    assert lines[:3] == ["id    rank  outcome  where         tokens  reason",
                         "fr    1     placed   #0 documents  12      pruned to 31 of 89 characters, fits",
                         "lyon  2     placed   #1 documents  10      fits whole"]
    note = ("edgewise: 1 of 2 chunks in the prompt pruned to 31 of 89 characters (--prune 0 keeps every sentence): "
            "--table or --format json gives what each kept\n")
    args = ("pack", "-q", QUERY, "-c", chunks_file, *FLAGS)
    for fmt in ("text", "openai", "anthropic"):
        assert run(capsys, *args, "-f", fmt)[::2] == (0, note), fmt
    assert run(capsys, *args, "--table") == (0, packed.prompt + "\n", "\n" + table(packed) + "\n")
    code, out, err = run(capsys, *args, "-f", "json")  # the record is in the output: no note
    assert (code, err) == (0, "") and json.loads(out)["debug_info"] == d.to_dict()
    assert json.loads(out)["debug_info"]["chunks"][0]["pruned"] == {"original_chars": 89, "kept_chars": 31,
                                                                    "score": SCORE}


def test_without_prune_or_with_nothing_cut_the_records_and_output_are_as_before(capsys, chunks_file):
    for options in ({"tokenizer": "words", "layout": "paper"}, {**PRUNE, "prune": 0.0}):  # 0 keeps every sentence
        d = pack(QUERY, CHUNKS, **options).debug_info
        assert d.pruned == [] and [tuple(r) for r in d.chunks] == [CHUNK_KEYS] * 2
        assert [r["reason"] for r in d.chunks] == ["fits whole"] * 2
    assert run(capsys, "pack", "-q", QUERY, "-c", chunks_file, "-t", "words")[::2] == (0, "")
    assert run(capsys, "pack", "-q", QUERY, "-c", chunks_file, *FLAGS, "--prune", "0")[::2] == (0, "")


def test_a_pruned_chunk_then_cut_or_summarised_says_both():
    chunks = [{"id": "fr", "text": "Paris is the capital of France. Bananas are yellow.", "score": 0.9},
              {"id": "long", "text": LONG, "score": 0.5}]
    d = pack(QUERY, chunks, budget=120, **PRUNE).debug_info
    assert d.chunks[1] == {
        "id": "long", "input_index": 1, "rank": 1, "score": 0.5, "outcome": "truncated",
        "reason": "pruned to 831 of 851 characters, then cut at a token boundary to fit", "position": 1,
        "section": "documents", "tokens": 71, "merged_into": None,
        "pruned": {"original_chars": 851, "kept_chars": 831, "score": 0.895781}}
    summarised = pack(QUERY, chunks, budget=120, summaries="auto", high_importance_k=1, summary_tokens=20,
                      **PRUNE).debug_info
    record = summarised.chunks[1]
    assert (record["outcome"], record["reason"], record["pruned"]) == (
        "summarized", "pruned to 831 of 851 characters, then extractive summary fits where the whole chunk does not",
        {"original_chars": 851, "kept_chars": 831, "score": 0.895781})


def test_a_pruned_chunk_left_out_keeps_its_reason_and_says_it_was_cut(capsys, tmp_path):
    chunks = [{"id": "fr", "text": "Paris is the capital of France. Bananas are yellow.", "score": 0.9},
              {"id": "long", "text": LONG, "score": 0.5}]
    packed = pack(QUERY, chunks, budget=120, min_truncated_tokens=500, **PRUNE)
    d = packed.debug_info
    why = ("does not fit: needs more than 74 tokens (it has more words) whole, 74 left: too few to truncate it to 500 "
           "tokens plus at least 4 for its tags")
    assert d.chunks[1] == {
        "id": "long", "input_index": 1, "rank": 1, "score": 0.5, "outcome": "dropped", "reason": why,
        "position": None, "section": None, "tokens": None, "merged_into": None,
        "pruned": {"original_chars": 851, "kept_chars": 831, "score": 0.895781}}
    assert d.dropped == [{"id": "long", "input_index": 1, "reason": why}]
    # the note counts the chunks in the prompt it cut; the one left out is the next line's
    assert notes(packed) == (
        "edgewise: 1 of 1 chunk in the prompt pruned to 31 of 51 characters (--prune 0 keeps every sentence): "
        "--table or --format json gives what each kept\n"
        "edgewise: 1 of 2 chunks left out of the prompt (budget 120 tokens): --table or --format json gives each reason")
    path = tmp_path / "chunks.json"
    path.write_text(json.dumps(chunks))
    code, _, err = run(capsys, "pack", "-q", QUERY, "-c", str(path), "-b", "120", "--min-truncated-tokens", "500", *FLAGS)
    assert (code, err) == (0, notes(packed) + "\n")


def test_a_merged_duplicate_of_a_pruned_chunk_is_not_marked():
    chunks = [{"id": "fr", "text": "Paris.", "score": 0.1}, {"id": "fr", "text": FR, "score": 0.9}]
    d = pack(QUERY, chunks, **PRUNE).debug_info
    assert [(r["outcome"], r["merged_into"], PRUNED_KEY in r) for r in d.chunks] == [
        ("dropped", 1, False), ("placed", None, True)]


def test_to_dict_copies_the_nested_pruning_record():
    d = pack(QUERY, CHUNKS, **PRUNE).debug_info
    out = d.to_dict()
    out["chunks"][0]["pruned"]["kept_chars"] = -1
    assert d.chunks[0]["pruned"]["kept_chars"] == 31 and d.to_dict() != out


def test_a_batch_row_of_a_pruned_pack_stores_the_reason_and_reads_back_as_to_dict():
    pytest.importorskip("pyarrow")
    from edgewise.batch.rows import packed_dict, packed_row, to_table
    from edgewise.packing.packer import Packer

    chunks = [*CHUNKS, {"id": "fr", "text": "Paris.", "score": 0.1}]  # a merged duplicate of the cut chunk
    packed = Packer(PRUNE).pack(QUERY, chunks)
    stored = to_table([packed_row(0, "r", packed)]).to_pylist()[0]
    assert [r["reason"] for r in stored["chunks"]][:2] == ["pruned to 31 of 89 characters, fits", "fits whole"]
    assert packed_dict(stored) == packed.to_dict()
    assert [PRUNED_KEY in r for r in packed_dict(stored)["debug_info"]["chunks"]] == [True, False, False]
