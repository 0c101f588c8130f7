"""Placement strategies against the published behaviour of Haystack, LangChain and LlamaIndex."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgewise import ConfigError, InputError, order_names, pack, place, reorder


def nums(n):
    return [str(i) for i in range(1, n + 1)]


def test_edges_is_haystacks_lost_in_the_middle_order():
    assert reorder(nums(9), "edges") == "1 3 5 7 9 8 6 4 2".split()
    assert reorder(nums(10), "edges") == "1 3 5 7 9 10 8 6 4 2".split()
    assert reorder(nums(2), "edges") == ["1", "2"]
    assert reorder(nums(1), "edges") == ["1"]
    assert reorder([], "edges") == []
    assert reorder(list("ABCDE"), "edges") == list("ACEDB")


# LangChain's / LlamaIndex's LongContextReorder on documents ranked 1..n.
MIRROR = {
    1: [1],
    2: [2, 1],
    3: [1, 3, 2],
    4: [2, 4, 3, 1],
    5: [1, 3, 5, 4, 2],
    6: [2, 4, 6, 5, 3, 1],
    7: [1, 3, 5, 7, 6, 4, 2],
}


@pytest.mark.parametrize("n", sorted(MIRROR))
def test_edges_mirror_is_long_context_reorder(n):
    assert reorder(list(range(1, n + 1)), "edges-mirror") == MIRROR[n]


def test_simple_orders():
    assert reorder(nums(5), "relevance") == nums(5)
    assert reorder(nums(5), "reverse") == ["5", "4", "3", "2", "1"]
    assert reorder(nums(5), "middle-boost") == ["5", "3", "1", "2", "4"]
    assert reorder(nums(6), "middle-boost") == ["6", "4", "2", "1", "3", "5"]
    # original: input order, whatever the ranks
    assert place("original", 4, input_order=[2, 0, 3, 1]) == [2, 0, 3, 1]


def test_position_puts_the_key_at_k_and_keeps_input_order():
    assert place("position:0", 5, input_order=[0, 1, 2, 3, 4], key=3) == [3, 0, 1, 2, 4]
    assert place("position:middle", 5, input_order=[0, 1, 2, 3, 4], key=0) == [1, 2, 0, 3, 4]
    assert place("position:last", 5, input_order=[0, 1, 2, 3, 4], key=0) == [1, 2, 3, 4, 0]
    assert place("position:9", 20, input_order=list(range(20)), key=0)[9] == 0
    with pytest.raises(InputError, match=r"position must be in 0\.\.4 for 5 chunks, but got 7"):
        place("position:7", 5, input_order=range(5), key=0)
    with pytest.raises(InputError, match="position must be first, middle, last or an integer, but got 'top'"):
        place("position:top", 5, input_order=range(5), key=0)


def test_calibrated_assigns_best_chunks_to_best_measured_slots(tmp_path):
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps([0.9, 0.5, 0.4, 0.6, 0.8]))
    # slots by accuracy: 0 (0.9), 4 (0.8), 3 (0.6), 1 (0.5), 2 (0.4) get ranks 0, 1, 2, 3, 4
    assert place(f"calibrated:{profile}", 5) == [0, 3, 4, 2, 1]
    # a 3-point curve interpolated onto 5 slots: 1.0, 0.75, 0.5, 0.6, 0.7
    profile.write_text(json.dumps({"accuracy": [1.0, 0.5, 0.7]}))
    assert place(f"calibrated:{profile}", 5) == [0, 1, 4, 3, 2]


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"a": 1}', "must be a non-empty JSON list of numbers"),
        ("[1, \"x\"]", "must be a non-empty JSON list of numbers"),
        ("[]", "must be a non-empty JSON list of numbers"),
        ("[1, 2,", "line 1: invalid JSON"),
    ],
)
def test_bad_profile_files_are_named(tmp_path, content, message):
    path = tmp_path / "p.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        place(f"calibrated:{path}", 3)


def test_unknown_order_lists_the_registered_ones():
    with pytest.raises(ConfigError) as err:
        reorder([1, 2], "zigzag")
    assert str(err.value) == f"unknown order 'zigzag'; choose one of: {', '.join(order_names())}"
    with pytest.raises(ConfigError, match="order 'edges' takes no argument"):
        reorder([1], "edges:3")


@given(st.integers(min_value=0, max_value=60), st.sampled_from(["edges", "edges-mirror", "relevance", "reverse", "original", "middle-boost"]))
def test_every_order_is_a_permutation(n, spec):
    assert sorted(place(spec, n, input_order=range(n))) == list(range(n))


def test_edges_puts_the_two_best_at_the_two_ends():
    for n in range(2, 40):
        out = place("edges", n)
        assert (out[0], out[-1]) == (0, 1)


def test_pack_applies_the_order_to_scored_chunks():
    chunks = [{"id": f"d{i}", "text": f"text {i}", "score": s} for i, s in enumerate([0.1, 0.9, 0.5, 0.7, 0.3])]
    out = pack("q", chunks, layout="layered", tokenizer="words")
    # ranked d1 d3 d2 d4 d0 -> edges: 1st 3rd 5th 4th 2nd
    assert out.debug_info.order == ["d1", "d2", "d0", "d4", "d3"]
