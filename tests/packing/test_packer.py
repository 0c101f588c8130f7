"""PackOptions, Packer, the fixed debug schema, position tests and section variants."""

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import edgewise
from edgewise import BudgetError, ConfigError, InputError, Packer, PackOptions, pack, variants
from edgewise.packing.debug import CHUNK_KEYS

from ..conftest import DATA

CHUNKS = [
    {"id": "a", "text": "Paris is the capital of France.", "score": 0.9},
    {"id": "b", "text": "Lyon is known for its food.", "score": 0.2},
    {"id": "c", "text": "France is in Europe.", "score": 0.5},
]


def test_options_round_trip_and_defaults():
    opts = PackOptions(budget=500, order="relevance", prune=0.3)
    assert PackOptions.from_dict(opts.to_dict()) == opts
    assert opts.to_dict(changed_only=True) == {"budget": 500, "order": "relevance", "prune": 0.3}
    assert PackOptions.from_dict(None) == PackOptions()
    assert opts.replace(budget=600).budget == 600 and opts.budget == 500


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        ({"colour": "blue"}, ConfigError, "unknown pack option 'colour'; choose from: budget, tokenizer, order"),
        ({"budget": True}, InputError, "budget must be an integer > 0, but got True"),
        ({"budget": 1.5}, InputError, "budget must be an integer > 0, but got 1.5"),
        ({"high_importance_k": -1}, InputError, "high_importance_k must be >= 0, but got -1"),
        ({"min_score": float("nan")}, InputError, "min_score must be a finite number, but got nan"),
        ({"min_score": 10**400}, InputError, "min_score must be a finite number, but got 1000"),
        ({"prune": 2}, InputError, "prune must be a threshold in [0, 1], but got 2"),
        ({"word_count_threshold": 0}, InputError, "word_count_threshold must be > 0, but got 0"),
        ({"summaries": "abstractive"}, InputError, "summaries must be one of given, auto, llm, but got 'abstractive'"),
        ({"prune_scorer": "x"}, InputError, "prune_scorer must be one of auto, dense, dense2, lexical, but got 'x'"),
        ({"rescore": "yes"}, InputError, "rescore must be true or false, but got 'yes'"),
        ({"system": 3}, InputError, "system must be a string, but got int"),
        ({"order": ""}, InputError, "order must be a non-empty name, but got ''"),
    ],
)
def test_bad_options_name_the_rule_and_the_value(data, error, message):
    with pytest.raises(error) as exc:
        PackOptions.from_dict(data)
    assert str(exc.value).startswith(message)


def test_word_count_threshold_takes_a_float_as_haystack_does():
    out = pack("q", ["one two three", "four five", "six"], word_count_threshold=4.5, tokenizer="words")
    assert out.debug_info.placed == ["chunk-0", "chunk-1"]
    assert out.debug_info.dropped[0]["reason"] == "word_count_threshold=4.5 reached by the chunk ranked 2"


def test_json_schema_describes_every_option():
    schema = PackOptions.json_schema()
    assert schema["additionalProperties"] is False
    assert list(schema["properties"]) == PackOptions.names()
    assert schema["properties"]["budget"]["anyOf"] == [{"type": "integer", "minimum": 1}, {"type": "null"}]
    assert schema["properties"]["summaries"] == {
        "type": "string", "enum": ["given", "auto", "llm"], "default": "given",
        "description": "summaries of the chunks past the key facts that have no meta.summary: given: none written; "
                       "auto: extractive; llm: written by summary_backend",
    }


def test_pack_takes_options_object_dict_and_keywords_alike():
    by_kw = pack("capital?", CHUNKS, budget=300, layout="paper")
    by_obj = pack("capital?", CHUNKS, PackOptions(budget=300, layout="paper"))
    by_dict = pack("capital?", CHUNKS, {"budget": 300, "layout": "paper"})
    mixed = pack("capital?", CHUNKS, PackOptions(budget=10_000, layout="paper"), budget=300)
    assert by_kw.prompt == by_obj.prompt == by_dict.prompt == mixed.prompt
    assert by_kw.debug_info.to_dict() == by_obj.debug_info.to_dict()


def test_packer_holds_options_and_resolves_names_at_construction():
    packer = Packer(budget=300, layout="paper")
    assert packer.pack("capital?", CHUNKS).prompt == pack("capital?", CHUNKS, budget=300, layout="paper").prompt
    assert packer.pack("capital?", CHUNKS, order="relevance").debug_info.order == ["a", "c", "b"]
    assert packer.options.order == "edges"  # a per-call override does not stick
    with pytest.raises(ConfigError, match="unknown order 'sideways'"):
        Packer(order="sideways")
    with pytest.raises(ConfigError, match="unknown tokenizer 'gpt9'"):
        Packer(tokenizer="gpt9")
    assert repr(packer) == "Packer(budget=300, layout='paper')"


def test_packer_keeps_its_scorer_across_calls():
    packer = Packer(scorer="bm25", rescore=True)
    first = packer.scorer(packer.options)
    packer.pack("capital of france", CHUNKS)
    assert packer.scorer(packer.options) is first


def test_packer_is_safe_from_many_threads():
    packer = Packer(budget=200, scorer="bm25", rescore=True)
    texts = [[{"id": f"{t}-{i}", "text": f"passage {t} {i} " * (i + 3)} for i in range(12)] for t in range(16)]
    expected = [packer.pack(f"passage {t}", texts[t]).prompt for t in range(16)]
    got: dict[int, list[str]] = {}
    errors: list[BaseException] = []

    def work(t):
        try:
            got[t] = [packer.pack(f"passage {t}", texts[t]).prompt for _ in range(20)]
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert {t: set(v) for t, v in got.items()} == {t: {expected[t]} for t in range(16)}


def test_debug_records_have_one_schema_and_true_input_indexes():
    chunks = [{"id": "x", "text": "first", "score": 0.1}, {"id": "y", "text": "y" * 4000, "score": 0.5},
              {"id": "x", "text": "second x", "score": 0.9}, {"text": "plain", "score": 0.3}]
    info = pack("q", chunks, budget=350, min_truncated_tokens=500).debug_info
    assert [tuple(r) for r in info.chunks] == [CHUNK_KEYS] * 4
    assert [(r["id"], r["input_index"], r["outcome"], r["merged_into"]) for r in info.chunks] == [
        ("x", 0, "dropped", 2), ("y", 1, "dropped", None), ("x", 2, "placed", None), ("chunk-3", 3, "placed", None)]
    assert info.dropped == [
        {"id": "x", "input_index": 0, "reason": "duplicate id with another text: input #2 kept instead (it has the higher score); this text is in no prompt"},
        {"id": "y", "input_index": 1, "reason": info.chunks[1]["reason"]},
    ]
    assert info.chunks[1]["reason"].startswith("does not fit: needs")


def test_position_errors_name_the_real_cause():
    chunks = [{"id": f"d{i}", "text": f"document {i} " * 40} for i in range(6)]
    with pytest.raises(InputError, match=r"position must be in 0\.\.5 for 6 chunks, but got 9"):
        pack("q", chunks, order="position:9", key_id="d2")
    with pytest.raises(BudgetError, match=r"puts the key chunk at index 4 \(counted over the 6 input chunks\), "
                                          r"but only 3 of them fit in budget 420; raise the budget or lower K"):
        pack("q", chunks, order="position:4", key_id="d2", budget=420, layout="paper")
    with pytest.raises(InputError, match="needs the key chunk 'd2' in the prompt, but it was dropped: score"):
        pack("q", [{**c, "score": 1.0 if c["id"] != "d2" else 0.0} for c in chunks], order="position:1", key_id="d2",
             min_score=0.5)


def test_variants_put_the_key_chunk_in_each_section():
    chunks = [{"id": f"d{i}", "text": f"document {i}", "score": 1 - i / 10} for i in range(8)]
    out = variants("q", chunks, "d5", ["A", "B", "C"], layout="sections", high_importance_k=4)
    a, b, c = (out[k].debug_info for k in "ABC")
    assert (a.section_A_ids[0], "d5" in a.section_B_ids + a.section_C_ids) == ("d5", False)
    assert "d5" in b.section_B_ids and "d5" not in b.section_A_ids + b.section_C_ids
    assert (c.section_C_ids[-1], "d5" in c.section_A_ids + c.section_B_ids) == ("d5", False)
    assert len(b.section_A_ids) + len(b.section_C_ids) > 0  # the edges still hold key facts
    with pytest.raises(ConfigError, match="position 'B' names a section, but layout 'paper' has none"):
        variants("q", chunks, "d5", ["B"], layout="paper")


def test_cli_flags_come_from_the_options(tmp_path):
    f = tmp_path / "c.json"
    f.write_text(json.dumps(CHUNKS), encoding="utf-8")
    run = lambda *a: subprocess.run([sys.executable, "-m", "edgewise", *a], capture_output=True, text=True)  # noqa: E731
    out = run("pack", "-q", "capital?", "-c", str(f), "--prune-scorer", "lexical", "--prune", "0.2", "-f", "json",
              "--word-count-threshold", "8.5")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["debug_info"]["placed"] == ["a", "c"]
    bad = run("pack", "-q", "q", "-c", str(f), "--summaries", "abstractive")
    assert bad.returncode == 2 and "invalid choice: 'abstractive'" in bad.stderr
    assert run("--version").stdout.strip() == f"edgewise {edgewise.__version__}"


def test_fixed_layers_are_rendered_or_refused_never_dropped():
    layered = pack("q", ["a"], layout="layered", instructions="Answer in French.", tokenizer="words")
    assert "[Task instructions]\n  Answer in French.\n" in layered.prompt
    for name in ("paper", "kv"):
        for layer in ("instructions", "expected_output"):
            with pytest.raises(ConfigError, match=f"layout '{name}' has no place for {layer}; put them in system="):
                pack("q", [{"text": "a", "meta": {"key": "k"}}], layout=name, **{layer: "x"})


def test_paper_layout_without_documents_is_the_papers_closed_book_prompt():
    assert pack("who wrote hamlet?", [], layout="paper").prompt == (
        "Write a high-quality answer for the given question.\n\nQuestion: who wrote hamlet?\nAnswer:")
    # with documents, the longer open-book instruction; too small a budget for it gives the closed-book prompt
    out = pack("q", ["Shakespeare wrote Hamlet."], layout="paper", budget=60)
    assert out.prompt.startswith("Write a high-quality answer for the given question using only the provided search")
    assert out.debug_info.prompt_tokens <= 60
    tight = pack("q", ["Shakespeare wrote Hamlet."], layout="paper", budget=20)
    assert tight.prompt == "Write a high-quality answer for the given question.\n\nQuestion: q\nAnswer:"
    assert tight.debug_info.dropped[0]["reason"].startswith("budget exhausted")


def test_score_command_scores_what_pack_ranks_by(tmp_path):
    """kv records carry their key in meta.key: `edgewise score` and pack(scorer=...) both read it."""
    records = [{"id": f"r{i}", "text": f"value-{i}", "meta": {"key": key}}
               for i, key in enumerate(["alpha-key", "bravo-key", "charlie-key"])]
    f = tmp_path / "r.json"
    f.write_text(json.dumps(records), encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "edgewise", "score", "-q", "bravo-key", "-c", str(f), "--scorer", "bm25"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    cli_scores = {r["id"]: r["score"] for r in json.loads(out.stdout)}
    info = pack("bravo-key", records, scorer="bm25", layout="kv").debug_info
    assert cli_scores == {r["id"]: r["score"] for r in info.chunks}
    assert max(cli_scores, key=cli_scores.get) == "r1" and cli_scores["r1"] > 0


# -- the option kinds table ---------------------------------------------------------------------

SCHEMA_FILE = DATA / "pack-options-schema.json"


def test_json_schema_is_the_committed_one():
    # the committed file is the schema clients of the HTTP API validate against: a change to it is a
    # change to the API, made on purpose by regenerating the file
    committed = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    schema = PackOptions.json_schema()
    assert schema == committed
    assert list(schema["properties"]) == list(committed["properties"])  # the order fields are listed in


def test_the_kinds_table_covers_every_option_and_is_the_only_place_kinds_are_told_apart():
    from edgewise import options

    kinds = {name: PackOptions.spec(name).kind for name in PackOptions.names()}
    assert set(kinds.values()) == set(options.KINDS)  # every kind used, every used kind in the table
    assert set(options.KINDS) == {"int", "number", "positive", "unit", "bool", "text", "str", "choice", "name"}
    source = Path(options.__file__).read_text(encoding="utf-8")
    assert re.findall(r"spec\.kind\s*(?:==|!=|in\b|not in\b)", source) == []  # no chain testing kinds


def test_an_unknown_kind_is_refused_when_an_option_is_declared():
    from edgewise import options

    with pytest.raises(ValueError) as exc:
        options._opt(None, "colour", "a colour")
    assert str(exc.value) == ("option kind must be one of: int, number, positive, unit, bool, text, str, choice, name, "
                              "but got 'colour'")


def test_a_kind_is_one_entry_read_by_every_place_an_option_appears(monkeypatch):
    import argparse

    from edgewise import options

    def check(name, value, spec, optional):
        if value is not None and value % 2:
            raise InputError(f"{name} must be even, but got {value}")

    even = options.Kind(check=check, schema=lambda s: {"type": "integer", "multipleOf": 2}, parse=options._parse_int,
                        flag=lambda s: {"type": int, "metavar": "EVEN"}, help_tail=" (even)")
    monkeypatch.setitem(options.KINDS, "even", even)
    spec = options.Spec("even", "pairs per row")
    monkeypatch.setitem(options._SPECS, "top_k", spec)  # top_k, declared as the new kind for this test
    assert options._schema(spec, None) == {"anyOf": [{"type": "integer", "multipleOf": 2}, {"type": "null"}]}
    with pytest.raises(InputError) as exc:
        PackOptions(top_k=3)
    assert str(exc.value) == "top_k must be even, but got 3"
    assert options.parse_value("top_k", " 4 ") == 4
    parser = argparse.ArgumentParser()
    options.add_arguments(parser)
    assert options.from_args(parser.parse_args(["--top-k", "6"])).top_k == 6
    flag = next(a for a in parser._actions if a.dest == "top_k")
    assert (flag.metavar, flag.type, flag.help) == ("EVEN", int, "pairs per row (even)")


# -- the debug record ---------------------------------------------------------------------------

def test_the_debug_record_is_built_from_one_trace_the_packer_fills(monkeypatch):
    import dataclasses
    import inspect

    from edgewise.packing import debug

    assert list(inspect.signature(debug.build).parameters) == ["trace"]
    traces = []
    real = debug.build
    monkeypatch.setattr(debug, "build", lambda trace: traces.append(trace) or real(trace))
    chunks = [*CHUNKS, {"id": "a", "text": "a duplicate", "score": 0.1},
              {"id": "d", "text": "Rome is the capital of Italy. " * 40, "score": 0.4}]
    packed = pack("capital?", chunks, budget=260, layout="layered", tokenizer="words", top_k=3)
    (trace,) = traces
    assert isinstance(trace, debug.PackTrace) and dataclasses.is_dataclass(trace)
    with pytest.raises(dataclasses.FrozenInstanceError):
        trace.budget = 1
    again = real(dataclasses.replace(trace))
    assert again.to_dict() == packed.debug_info.to_dict()
    assert [(r["id"], r["outcome"], r["reason"]) for r in again.chunks] == [
        ("a", "placed", "fits whole"), ("b", "dropped", "beyond top_k=3 (rank 4)"), ("c", "placed", "fits whole"),
        ("a", "dropped", "duplicate id with another text: input #0 kept instead (it has the higher score); this text is in no prompt"), ("d", "truncated", "cut at a token boundary to fit")]


# -- Packer.pack_with: what variants calls ------------------------------------------------------

def test_pack_with_uses_exactly_the_options_given_and_places_the_key_chunk_by_section():
    packer = Packer(tokenizer="words", budget=5000, high_importance_k=2)
    chunks = [{"id": i, "text": i, "score": 1.0} for i in "abcd"]
    assert packer.pack_with("q", chunks, PackOptions(tokenizer="words")).debug_info.budget is None
    assert packer.pack_with("q", chunks, {"tokenizer": "words"}).prompt == pack("q", chunks, tokenizer="words").prompt
    opts = packer.options.replace(key_id="a", order="position:middle")
    assert {ks: packer.pack_with("q", chunks, opts, key_section=ks).debug_info.sections for ks in (None, "A", "B", "C")} == {
        None: {"A": ["b", "a"], "B": ["c", "d"], "C": []},
        "A": {"A": ["b", "a"], "B": ["c", "d"], "C": []},
        "B": {"A": ["b"], "B": ["a", "c", "d"], "C": []},
        "C": {"A": ["b", "a"], "B": ["c", "d"], "C": []},
    }


@pytest.mark.parametrize(
    ("options", "key_section", "error", "message"),
    [
        ({"key_id": "a", "order": "position:middle"}, "D", InputError, "key_section must be one of A, B, C, but got 'D'"),
        ({"key_id": "a", "order": "position:middle"}, 2, InputError, "key_section must be a string, but got int"),
        ({"key_id": "a"}, "B", ConfigError, "key_section places the key chunk of a position test, so it needs a key_id "
         "and order position:..., but got order 'edges' and key_id 'a'"),
        ({"order": "position:0"}, "B", ConfigError, "key_section places the key chunk of a position test, so it needs a "
         "key_id and order position:..., but got order 'position:0' and key_id None"),
    ],
)
def test_pack_with_refuses_a_key_section_it_cannot_use(options, key_section, error, message):
    with pytest.raises(error) as exc:
        Packer(tokenizer="words").pack_with("q", ["a", "b"], {"tokenizer": "words", **options}, key_section=key_section)
    assert str(exc.value) == message


def test_no_module_calls_a_private_method_of_the_packer():
    src = Path(edgewise.__file__).parent
    calls = [f"{p.relative_to(src)}: {line.strip()}" for p in sorted(src.rglob("*.py")) if p.name != "packer.py"
             for line in p.read_text(encoding="utf-8").splitlines() if re.search(r"\bpacker\(\)\._|\bpacker\._", line)]
    assert calls == []
