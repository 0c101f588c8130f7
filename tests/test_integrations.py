"""The adapters against the real components they replace, on random input."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise import InputError

haystack = pytest.importorskip("haystack")
pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from haystack import Document  # noqa: E402
from haystack.components.rankers import LostInTheMiddleRanker  # noqa: E402
from langchain_core.documents import Document as LCDocument  # noqa: E402
from llama_index.core.postprocessor import LongContextReorder  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402

from edgewise.integrations.haystack import EdgewiseRanker  # noqa: E402
from edgewise.integrations.langchain import EdgewiseReorder as LCReorder  # noqa: E402
from edgewise.integrations.llamaindex import EdgewiseReorder as LIReorder  # noqa: E402
from edgewise.tokens import get_tokenizer  # noqa: E402

WORDS = st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta"]), min_size=0, max_size=6).map(" ".join)


@settings(max_examples=200)
@given(
    st.lists(st.tuples(WORDS, st.sampled_from(["a", "b", "c", "d", "e", "f", "g", None]), st.one_of(st.none(), st.floats(0, 1))), max_size=12),
    st.one_of(st.none(), st.integers(1, 12)),
    st.one_of(st.none(), st.integers(1, 30)),
)
def test_haystack_ranker_returns_what_lost_in_the_middle_ranker_returns(rows, top_k, threshold):
    docs = [Document(content=text, id=doc_id, score=score) if doc_id else Document(content=text, score=score)
            for text, doc_id, score in rows]
    theirs = LostInTheMiddleRanker(word_count_threshold=threshold, top_k=top_k).run(documents=docs)["documents"]
    ours = EdgewiseRanker(word_count_threshold=threshold, top_k=top_k).run(documents=docs)["documents"]
    assert [(d.id, d.content, d.score) for d in ours] == [(d.id, d.content, d.score) for d in theirs]


def test_haystack_ranker_checks_at_init_and_at_run_and_adds_a_token_budget():
    with pytest.raises(InputError, match="top_k must be > 0, but got 0"):
        EdgewiseRanker(top_k=0)
    with pytest.raises(InputError, match="word_count_threshold must be > 0, but got -2"):
        EdgewiseRanker().run(documents=[Document(content="x")], word_count_threshold=-2)
    with pytest.raises(InputError, match="documents must all have text content"):
        EdgewiseRanker().run(documents=[Document(content=None)])
    docs = [Document(content=f"document number {i} " * 10) for i in range(10)]
    tok = get_tokenizer("cl100k_base")
    out = EdgewiseRanker(budget=200).run(documents=docs)["documents"]
    assert sum(tok.count(d.content) for d in out) <= 200 < sum(tok.count(d.content) for d in docs[: len(out) + 1])
    assert out[0].content == docs[0].content and out[-1].content == docs[1].content


@settings(max_examples=100)
@given(st.lists(st.one_of(st.none(), st.sampled_from([0.1, 0.5, 0.5, 0.9, 1.0])), max_size=10))
def test_llamaindex_reorder_returns_what_long_context_reorder_returns(scores):
    nodes = [NodeWithScore(node=TextNode(text=f"t{i}", id_=f"n{i}"), score=s) for i, s in enumerate(scores)]
    theirs = LongContextReorder().postprocess_nodes(list(nodes))
    ours = LIReorder().postprocess_nodes(list(nodes))
    assert [n.node.node_id for n in ours] == [n.node.node_id for n in theirs]


def langchain_reference(docs):
    """LangChain's published LongContextReorder algorithm (langchain_community), for documents best first."""
    out = []
    for i, doc in enumerate(reversed(docs)):
        if i % 2 == 1:
            out.append(doc)
        else:
            out.insert(0, doc)
    return out


@given(st.integers(0, 15))
def test_langchain_reorder_returns_what_long_context_reorder_returns(n):
    docs = [LCDocument(page_content=str(i)) for i in range(n)]
    assert [d.page_content for d in LCReorder().transform_documents(docs)] == [d.page_content for d in langchain_reference(docs)]


def test_langchain_reorder_with_top_k_and_best_first():
    docs = [LCDocument(page_content=str(i)) for i in range(1, 8)]
    assert [d.page_content for d in LCReorder(order="edges", top_k=4).transform_documents(docs)] == ["1", "3", "4", "2"]
