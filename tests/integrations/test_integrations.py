"""The adapters against the real components they replace, and their token budget.

The budget rule (edgewise.integrations): documents in rank order, whole, until the first that does
not fit; the best one cut to the budget when it does not fit alone; never empty, never over.
"""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise import ConfigError, InputError

pytest.importorskip("haystack", reason="needs haystack-ai: pip install -e '.[haystack]'")
pytest.importorskip("langchain_core", reason="needs langchain-core: pip install -e '.[langchain]'")
pytest.importorskip("llama_index.core", reason="needs llama-index-core: pip install -e '.[llamaindex]'")

from haystack import Document  # noqa: E402
from haystack.components.rankers import LostInTheMiddleRanker  # noqa: E402
from langchain_core.documents import Document as LCDocument  # noqa: E402
from llama_index.core.postprocessor import LongContextReorder  # noqa: E402
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode  # noqa: E402

from edgewise.integrations import TRUNCATED_KEY  # noqa: E402
from edgewise.integrations.haystack import EdgewiseRanker  # noqa: E402
from edgewise.integrations.langchain import EdgewiseReorder as LCReorder  # noqa: E402
from edgewise.integrations.llamaindex import EdgewiseReorder as LIReorder  # noqa: E402
from edgewise.tokens.tokenizers import get_tokenizer  # noqa: E402

WORDS = st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta"]), min_size=0, max_size=6).map(" ".join)
TOK = get_tokenizer("cl100k_base")


@settings(max_examples=80, deadline=None)
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
    assert [id(d) for d in ours] == [id(d) for d in theirs]


def test_edgewise_options_are_checked_when_the_adapter_is_built():
    for build in (EdgewiseRanker, LCReorder, LIReorder):
        with pytest.raises(InputError, match="^budget must be > 0, but got 0$"):
            build(budget=0)
        with pytest.raises(ConfigError, match="^unknown order 'middle'"):
            build(order="middle")
        with pytest.raises(ConfigError, match="^unknown tokenizer 'nope'"):
            build(budget=10, tokenizer="nope")
    for build in (LCReorder, LIReorder):
        with pytest.raises(InputError, match="^top_k must be > 0, but got 0$"):
            build(top_k=0)


# --- LlamaIndex and LangChain beside their LongContextReorder ---------------------------------------


def nodes_from(scores):
    return [NodeWithScore(node=TextNode(text=f"text {i}", id_=f"n{i}", metadata={"source": f"s{i}"}), score=s)
            for i, s in enumerate(scores)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.none(), st.sampled_from([0.1, 0.5, 0.5, 0.9, 1.0])), max_size=10))
def test_llamaindex_reorder_returns_what_long_context_reorder_returns(scores):
    nodes = nodes_from(scores)
    theirs = LongContextReorder().postprocess_nodes(list(nodes))
    ours = LIReorder().postprocess_nodes(list(nodes))
    assert [id(n) for n in ours] == [id(n) for n in theirs]  # the very objects: ids, metadata and scores intact
    assert [(n.node.node_id, n.node.metadata, n.score) for n in ours] == [(n.node.node_id, n.node.metadata, n.score) for n in theirs]


def langchain_reference(docs):
    """LangChain's LongContextReorder (langchain_community ``_litm_reordering``), for documents best first."""
    out = []
    for i, doc in enumerate(reversed(docs)):
        if i % 2 == 1:
            out.append(doc)
        else:
            out.insert(0, doc)
    return out


def lc_docs(n):
    return [LCDocument(page_content=f"text {i}", id=f"d{i}", metadata={"rank": i}) for i in range(n)]


@given(st.integers(0, 15))
def test_langchain_reorder_returns_what_long_context_reorder_returns(n):
    docs = lc_docs(n)
    assert [id(d) for d in LCReorder().transform_documents(docs)] == [id(d) for d in langchain_reference(docs)]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_langchain_reorder_beside_the_real_long_context_reorder():
    community = pytest.importorskip("langchain_community.document_transformers",
                                    reason="LangChain's LongContextReorder ships in langchain-community: pip install -e '.[dev]'")
    for n in range(12):
        docs = lc_docs(n)
        theirs = community.LongContextReorder().transform_documents(docs)
        assert [id(d) for d in LCReorder().transform_documents(docs)] == [id(d) for d in theirs]
        assert [id(d) for d in theirs] == [id(d) for d in langchain_reference(docs)]  # the reference above is right


LC_DEFAULTS = {"order": "edges-mirror", "budget": None, "tokenizer": "cl100k_base", "top_k": None}


def test_langchain_reorder_is_a_pydantic_model_like_long_context_reorder():
    from pydantic import BaseModel, ValidationError

    assert issubclass(LCReorder, BaseModel)
    assert LCReorder().model_dump() == LC_DEFAULTS
    custom = LCReorder(order="edges", budget=9, tokenizer="words", top_k=3)
    dumped = custom.model_dump()
    assert dumped == {"order": "edges", "budget": 9, "tokenizer": "words", "top_k": 3}
    for again in (LCReorder.model_validate(dumped), LCReorder.model_validate_json(custom.model_dump_json()),
                  LCReorder(**dumped)):
        assert (type(again), again.model_dump(), again) == (LCReorder, dumped, custom)
    docs = [LCDocument(page_content=f"w{i} x", id=f"d{i}") for i in range(6)]
    assert [d.page_content for d in LCReorder.model_validate(dumped).transform_documents(docs)] == ["w0 x", "w2 x", "w1 x"]
    assert LCReorder.model_validate({}).model_dump() == LC_DEFAULTS
    # the options are checked on the way in, whichever way it is built
    for bad, message in (({"budget": 0}, "budget must be > 0, but got 0"),
                         ({"order": "middle"}, "unknown order 'middle'"),
                         ({"budget": "5"}, "budget must be an integer > 0, but got '5'"),
                         ({"top_k": 0}, "top_k must be > 0, but got 0"),
                         ({"budget": 3, "tokenizer": "nope"}, "unknown tokenizer 'nope'")):
        with pytest.raises(ValidationError, match=re.escape(message)):
            LCReorder.model_validate(bad)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        LCReorder.model_validate({"budgett": 5})


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_langchain_reorder_is_a_drop_in_where_long_context_reorder_is_used():
    import asyncio

    community = pytest.importorskip("langchain_community.document_transformers",
                                    reason="LangChain's LongContextReorder ships in langchain-community: pip install -e '.[dev]'")
    theirs, ours = community.LongContextReorder(), LCReorder()
    for n in range(9):
        docs = lc_docs(n)
        expected = [id(d) for d in theirs.transform_documents(docs)]
        assert [id(d) for d in ours.transform_documents(docs)] == expected
        assert [id(d) for d in asyncio.run(ours.atransform_documents(docs))] == expected
        assert [id(d) for d in asyncio.run(theirs.atransform_documents(docs))] == expected
    # in a pipeline of transformers, a pydantic model that holds its transformers as fields
    pipelines = pytest.importorskip("langchain_classic.retrievers.document_compressors",
                                    reason="DocumentCompressorPipeline ships in langchain-classic: pip install -e '.[dev]'")
    docs = lc_docs(7)
    with_theirs = pipelines.DocumentCompressorPipeline(transformers=[theirs])
    with_ours = pipelines.DocumentCompressorPipeline(transformers=[ours])
    assert [id(d) for d in with_ours.compress_documents(docs, "q")] == [id(d) for d in with_theirs.compress_documents(docs, "q")]
    assert [id(d) for d in asyncio.run(with_ours.acompress_documents(docs, "q"))] == [
        id(d) for d in with_theirs.compress_documents(docs, "q")]
    assert (with_theirs.model_dump(), with_ours.model_dump()) == ({"transformers": [{}]}, {"transformers": [LC_DEFAULTS]})


def test_langchain_reorder_with_top_k_and_best_first():
    docs = [LCDocument(page_content=str(i)) for i in range(1, 8)]
    assert [d.page_content for d in LCReorder(order="edges", top_k=4).transform_documents(docs)] == ["1", "3", "4", "2"]


# --- the budget, the same rule in the three adapters ------------------------------------------------


def haystack_run(texts, **options):
    docs = [Document(content=t, id=f"d{i}", meta={"n": i}, score=1.0 - i / 100) for i, t in enumerate(texts)]
    out = EdgewiseRanker(**options).run(documents=docs)["documents"]
    return docs, out, [(d.content, d.id, d.meta, d.score) for d in out]


def langchain_run(texts, **options):
    docs = [LCDocument(page_content=t, id=f"d{i}", metadata={"n": i}) for i, t in enumerate(texts)]
    out = LCReorder(**options).transform_documents(docs)
    return docs, out, [(d.page_content, d.id, d.metadata, None) for d in out]


def llamaindex_run(texts, **options):
    nodes = [NodeWithScore(node=TextNode(text=t, id_=f"d{i}", metadata={"n": i}), score=1.0 - i / 100) for i, t in enumerate(texts)]
    out = LIReorder(**options).postprocess_nodes(list(nodes))
    return nodes, out, [(n.node.get_content(metadata_mode=MetadataMode.NONE), n.node.node_id, n.node.metadata, n.score) for n in out]


ADAPTERS = {"haystack": haystack_run, "langchain": langchain_run, "llamaindex": llamaindex_run}


def score(i):
    return None if i is None else 1.0 - i / 100


def expected(texts, order, adapter, cut=None):
    """The rows the adapter should return: texts[i] for i in ``order``, or the first cut to ``cut``."""
    if cut is not None:
        return [(cut, "d0", {"n": 0, TRUNCATED_KEY: {"tokens": TOK.count(cut), "original_tokens": TOK.count(texts[0])}},
                 None if adapter == "langchain" else score(0))]
    return [(texts[i], f"d{i}", {"n": i}, None if adapter == "langchain" else score(i)) for i in order]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_the_budget_never_skips_a_better_document_for_a_smaller_one(adapter):
    texts = ["one two three four five", "six seven eight nine ten eleven", "end"]
    assert [TOK.count(t) for t in texts] == [5, 6, 1]
    # 5 + 6 > 10: the second ends the selection; the third (1 token) would fit but ranks lower
    assert ADAPTERS[adapter](texts, budget=10, order="edges")[2] == expected(texts, [0], adapter)
    assert ADAPTERS[adapter](texts, budget=11, order="edges")[2] == expected(texts, [0, 1], adapter)
    assert ADAPTERS[adapter](texts, budget=12, order="edges")[2] == expected(texts, [0, 2, 1], adapter)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_the_best_document_alone_over_the_budget_comes_back_cut_to_it(adapter):
    texts = ["alpha beta gamma delta epsilon zeta eta theta", "iota", "kappa"]
    inputs, out, rows = ADAPTERS[adapter](texts, budget=3)
    assert rows == expected(texts, None, adapter, cut="alpha beta gamma")
    original = inputs[0] if adapter != "llamaindex" else inputs[0].node
    assert (original.metadata if adapter != "haystack" else original.meta) == {"n": 0}  # the input is not touched
    if adapter == "llamaindex":  # the note stays out of what the LLM and the embedder read
        assert out[0].node.get_content(metadata_mode=MetadataMode.LLM) == "n: 0\n\nalpha beta gamma"
        assert out[0].node.get_content(metadata_mode=MetadataMode.EMBED) == "n: 0\n\nalpha beta gamma"


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_the_budget_applies_after_top_k(adapter):
    texts = ["a", "b", "c", "d", "e"]
    assert ADAPTERS[adapter](texts, budget=100, top_k=3, order="edges")[2] == expected(texts, [0, 2, 1], adapter)
    assert ADAPTERS[adapter](texts, budget=2, top_k=3, order="edges")[2] == expected(texts, [0, 1], adapter)


def test_haystack_budget_after_the_word_count_threshold():
    texts = ["a b", "c d", "e f", "g h"]  # 2 tokens each
    _, _, rows = haystack_run(texts, word_count_threshold=5, budget=5)  # threshold keeps 3, budget 2 of them
    assert rows == expected(texts, [0, 1], "haystack")


PIECES = st.sampled_from(["alpha", "beta gamma", "delta epsilon zeta eta", "Lorem ipsum dolor sit amet, consectetur",
                          "", "the the the the the the the the the the the the"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(PIECES, min_size=1, max_size=4).map(" ".join), min_size=1, max_size=8),
       st.integers(1, 40), st.sampled_from(list(ADAPTERS)))
def test_the_budget_gives_a_rank_prefix_never_empty_never_over(texts, budget, adapter):
    _, _, rows = ADAPTERS[adapter](texts, budget=budget, order="relevance")
    assert rows  # never empty for a non-empty input
    counts = [TOK.count(t) for t in texts]
    assert sum(TOK.count(row[0]) for row in rows) <= budget
    if counts[0] > budget:
        cut = TOK.truncate(texts[0], budget)
        assert rows == expected(texts, None, adapter, cut=cut) and texts[0].startswith(cut) and cut
    else:
        n = len(rows)  # whole documents, best first, up to the first that does not fit
        assert rows == expected(texts, range(n), adapter)
        assert n == len(texts) or sum(counts[: n + 1]) > budget
