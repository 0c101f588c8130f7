"""The count memos (``edgewise.packing.fast.counts``): the system text's count and the overhead estimate.

Both are kept per process so that a pack with fresh chunks does not re-count the layout's fixed text;
these tests hold what makes that safe: the kept values are the exact ones, they are bounded, they are
kept only where the name fixes the value, and the output is the same with or without them.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.layout import get_layout, hooks
from edgewise.packing.budget import BlockCosts, Layers, Meter, _measure_overhead, _overhead
from edgewise.packing.fast import counts
from edgewise.packing.fast.counts import PackCounts
from edgewise.packing.packer import Packer
from edgewise.tokens.tokenizers import TiktokenTokenizer, get_tokenizer

CHUNKS = [{"id": f"c{i}", "text": f"Passage {i} about the river and its {i} bridges.", "score": 1 - i / 10}
          for i in range(6)]


def test_a_cold_pack_does_not_re_encode_the_system_text_and_gives_the_same_prompt():
    tok = TiktokenTokenizer("cl100k_base")
    packer = Packer(tokenizer=tok, budget=400, layout="sections")
    first = packer.pack("Which river?", CHUNKS)
    system = first.rendered.system
    encoded: list[str] = []
    count_one = tok._count_one
    tok._count_one = lambda text: encoded.append(text) or count_one(text)
    tok.cache.clear()  # a cold pack: the count cache is empty
    again = packer.pack("Which river?", CHUNKS)
    assert again.prompt == first.prompt and again.debug_info == first.debug_info
    assert system not in encoded and system + "\n\n" not in encoded  # kept apart from the count cache
    assert any(text.startswith("<doc") for text in encoded)  # the chunks were counted again
    assert counts._STABLE[("cl100k_base", system)] == len(tok.encoding.encode_ordinary(system))
    assert counts._STABLE[("cl100k_base", system + "\n\n")] == len(tok.encoding.encode_ordinary(system + "\n\n"))


def test_stable_counts_are_bounded_and_only_for_the_exact_encodings():
    memo = PackCounts(get_tokenizer("cl100k_base"))
    for i in range(counts.STABLE_MAX_TEXTS + 10):
        memo.count_stable(f"system text number {i}")
    assert 0 < len(counts._STABLE) <= counts.STABLE_MAX_TEXTS
    assert memo.count_stable("x" * (counts.STABLE_MAX_CHARS + 1)) > 0
    assert ("cl100k_base", "x" * (counts.STABLE_MAX_CHARS + 1)) not in counts._STABLE
    words = PackCounts(get_tokenizer("words"))  # its name does not fix a vocabulary worth trusting
    before = dict(counts._STABLE)
    assert words.count_stable("three little words") == get_tokenizer("words").count("three little words")
    assert counts._STABLE == before


@settings(max_examples=60, deadline=None)
@given(query=st.text(min_size=1, max_size=80).filter(str.strip),
       layout=st.sampled_from(["sections", "layered", "paper"]), name=st.sampled_from(["cl100k_base", "o200k_base"]))
def test_the_overhead_estimate_does_not_depend_on_the_query(query: str, layout: str, name: str):
    """What makes keeping it per layout, layers and tokenizer exact: measured afresh for any query,
    it is the value measured for another."""
    lay, tok = get_layout(layout), PackCounts(get_tokenizer(name))
    meter = Meter(tok)
    cost = BlockCosts(lay, tok)

    def measured(q: str) -> int:
        layers = Layers(q)
        fixed = meter(hooks.render_fixed(lay, layers.input()))
        return _measure_overhead(lay, layers, meter, fixed, cost, 8)

    assert measured(query) == measured("What is the capital of France?")


def test_the_overhead_is_kept_only_for_layouts_that_render_by_name(tmp_path):
    template = tmp_path / "t.j2"
    template.write_text("{% for c in chunks %}{{ c.block }}\n{% endfor %}Q: {{ query }}\n", encoding="utf-8")
    tok = PackCounts(get_tokenizer("cl100k_base"))
    meter = Meter(tok)
    for spec, kept in (("sections", True), (f"template:{template}", False)):
        lay = get_layout(spec)
        layers = Layers("q?")
        fixed = meter(hooks.render_fixed(lay, layers.input()))
        counts._OVERHEADS.clear()
        value = _overhead(lay, layers, meter, fixed, BlockCosts(lay, tok), 8)
        key = (lay.name, replace(layers, query=""), "cl100k_base", 8)
        assert (counts._OVERHEADS.get(key) == value) is kept
