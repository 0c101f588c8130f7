"""EdgewisePacker in real LlamaIndex: options, serialisation, the nodes it hands back, and a
VectorStoreIndex query engine (edgewise's bundled MiniLM as the embedding model) with the packer as
its node postprocessor, answered by the real llama.cpp server with the bundled Gemma through
llama-index's OpenAILike."""

import asyncio
import logging

import pytest

from edgewise import ConfigError, InputError
from edgewise.tokens.tokenizers import get_tokenizer

pytest.importorskip("llama_index.core", reason="needs llama-index-core: pip install -e '.[llamaindex]'")

from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode  # noqa: E402

from edgewise.integrations.llamaindex import EdgewisePacker  # noqa: E402

PARIS = "Paris is the capital of France. Bananas grow in warm places. The Louvre is in Paris."


def nodes():
    return [NodeWithScore(node=TextNode(id_="de", text="Berlin is the capital of Germany.", metadata={"title": "Berlin", "n": 1}), score=0.4),
            NodeWithScore(node=TextNode(id_="fr", text=PARIS, metadata={"title": "Paris", "n": 2}), score=0.9),
            NodeWithScore(node=TextNode(id_="it", text="Rome is the capital of Italy.", metadata={"n": 3}), score=0.2)]


def words(**options):
    return EdgewisePacker(tokenizer="words", layout="paper", **options)


def ids(result):
    return [(n.node.node_id, n.score) for n in result]


# -- options and serialisation ------------------------------------------------------------------


@pytest.mark.parametrize(("options", "error", "message"), [
    ({"budget": 0}, InputError, "budget must be > 0, but got 0"),
    ({"summaries": "yes"}, InputError, "summaries must be one of given, auto, llm, but got 'yes'"),
    ({"budgt": 100}, ConfigError, "unknown pack option 'budgt'; choose from: budget,"),
    ({"order": "nope"}, ConfigError, "unknown order 'nope'; choose one of: edges,"),
    ({"tokenizer": "nope"}, ConfigError, "unknown tokenizer 'nope'; choose one of: cl100k_base,"),
    ({"scorer": "nope"}, ConfigError, "unknown scorer 'nope'; choose one of: given,"),
])
def test_an_invalid_option_fails_when_the_postprocessor_is_built(options, error, message):
    with pytest.raises(error) as caught:
        EdgewisePacker(**options)
    assert str(caught.value).startswith(message)


def test_it_serialises_its_changed_options_and_reads_them_back():
    packer = EdgewisePacker({"budget": 100, "order": "relevance"}, budget=300, prune=0.3, prune_scorer="lexical")
    assert packer.to_dict() == {"options": {"budget": 300, "order": "relevance", "prune": 0.3, "prune_scorer": "lexical"},
                                "class_name": "EdgewisePacker"}
    again = EdgewisePacker.from_json(packer.to_json())
    assert again.to_dict() == packer.to_dict()
    assert again.packer.options == packer.packer.options
    assert EdgewisePacker().to_dict() == {"options": {}, "class_name": "EdgewisePacker"}


# -- what comes back ----------------------------------------------------------------------------


def test_the_nodes_come_back_in_prompt_order_as_they_were():
    given = nodes()
    out = words(budget=500, order="relevance").postprocess_nodes(given, query_str="capital of France?")
    assert [n is g for n, g in zip(out, [given[1], given[0], given[2]])] == [True, True, True]  # unchanged: the same objects
    assert ids(words(budget=500).postprocess_nodes(given, query_str="capital of France?")) == \
        [("fr", 0.9), ("it", 0.2), ("de", 0.4)]  # edges: the best first, the second best last


def test_pruning_returns_a_copy_with_the_placed_text_and_says_so_in_the_metadata():
    given = nodes()
    out = words(budget=500, order="relevance", prune=0.1, prune_scorer="lexical").postprocess_nodes(given, query_str="capital of France?")
    fr = out[0]
    assert (fr.node.node_id, fr.score, fr.node.text) == ("fr", 0.9, "Paris is the capital of France.")
    assert fr.node.metadata == {"title": "Paris", "n": 2, "edgewise": {"form": "whole", "pruned": True,
                                                                       "original_chars": len(PARIS), "chars": 31}}
    assert (fr.node.excluded_llm_metadata_keys, fr.node.excluded_embed_metadata_keys) == (["edgewise"], ["edgewise"])
    assert fr.node.get_content(metadata_mode=MetadataMode.LLM) == "title: Paris\nn: 2\n\nParis is the capital of France."
    assert out[1:] == [given[0], given[2]]  # one sentence each: nothing to prune
    assert (given[1].node.text, given[1].node.metadata) == (PARIS, {"title": "Paris", "n": 2})  # the input is untouched


def test_dropped_nodes_are_logged_with_their_reasons_and_in_the_debug_info(caplog):
    long = NodeWithScore(node=TextNode(id_="long", text=" ".join(f"w{i}" for i in range(200))), score=0.95)
    packer = words(budget=80, order="relevance")
    with caplog.at_level(logging.INFO, logger="edgewise"):
        out = packer.postprocess_nodes([long, *nodes()], query_str="capital of France?")
    assert [(n.node.node_id, n.score, n.node.metadata["edgewise"]["form"]) for n in out] == [("long", 0.95, "truncated")]
    reason = "budget exhausted: 1 tokens left, less than any chunk needs (4)"
    assert caplog.messages == [f"EdgewisePacker kept 1 of 4 nodes; dropped: de ({reason}); fr ({reason}); it ({reason})"]
    packed, again = packer.pack_nodes([long, *nodes()], "capital of France?")
    assert ids(again) == ids(out)
    assert packed.debug_info.dropped == [{"id": i, "input_index": n, "reason": reason} for n, i in enumerate(["de", "fr", "it"], 1)]
    assert get_tokenizer("words").count(packed.prompt) <= 80


def test_nodes_sharing_an_id_are_both_kept():
    twin = [NodeWithScore(node=TextNode(id_="x", text="Paris is the capital of France."), score=s) for s in (0.5, 0.3)]
    packed, out = words(budget=500, order="relevance").pack_nodes(twin, "capital of France?")
    assert ids(out) == [("x", 0.5), ("x", 0.3)]
    assert packed.debug_info.order == ["#0", "#1"]


def test_no_nodes_gives_no_nodes_and_no_query_is_an_error():
    assert words().postprocess_nodes([], query_str="capital of France?") == []
    with pytest.raises(InputError, match=r"^EdgewisePacker packs for a query, but got none"):
        words().postprocess_nodes(nodes())


def test_apostprocess_nodes_gives_what_postprocess_nodes_gives():
    packer = words(budget=500, prune=0.1, prune_scorer="lexical")
    got = asyncio.run(packer.apostprocess_nodes(nodes(), query_str="capital of France?"))
    want = packer.postprocess_nodes(nodes(), query_str="capital of France?")
    assert [(n.node.node_id, n.node.text, n.node.metadata, n.score) for n in got] == \
        [(n.node.node_id, n.node.text, n.node.metadata, n.score) for n in want]


# -- a real query engine with a real LLM --------------------------------------------------------


@pytest.fixture(scope="module")
def llm_url(tmp_path_factory):
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[eval]'")
    from ..servers import llama_cpp

    with llama_cpp(tmp_path_factory.mktemp("llama"), n_ctx=2048) as url:
        yield url


def minilm():
    """A LlamaIndex embedding model over edgewise's bundled MiniLM (no hub download, no OpenAI)."""
    from llama_index.core.embeddings import BaseEmbedding

    from edgewise.score.dense import shared_dense

    class MiniLM(BaseEmbedding):
        def _get_query_embedding(self, query):
            return shared_dense().embed([query])[0].tolist()

        def _get_text_embedding(self, text):
            return shared_dense().embed([text])[0].tolist()

        def _get_text_embeddings(self, texts):
            return shared_dense().embed(texts).tolist()

        async def _aget_query_embedding(self, query):
            return self._get_query_embedding(query)

    return MiniLM(model_name="edgewise-minilm-int8")


BUDGET = 600


@pytest.mark.slow
@pytest.mark.models
def test_a_query_engine_answers_from_the_packed_nodes(nq_rows, llm_url):
    pytest.importorskip("llama_index.llms.openai_like", reason="needs llama-index-llms-openai-like")
    from llama_index.core import VectorStoreIndex
    from llama_index.llms.openai_like import OpenAILike

    from edgewise.eval.backends import bundled_model_path

    tokenizer = f"gguf:{bundled_model_path()}"
    passages = [TextNode(id_=f"nq-{n}", text=row["ctxs"][0]["text"], metadata={"title": row["ctxs"][0]["title"], "row": n})
                for n, row in enumerate(nq_rows[:30])]
    index = VectorStoreIndex(passages, embed_model=minilm())  # the embedding model given: none defaults to OpenAI
    packer = EdgewisePacker(budget=BUDGET, tokenizer=tokenizer, prune=0.2, prune_scorer="lexical")
    llm = OpenAILike(api_base=llm_url, model="gemma-3-270m", api_key="x", is_chat_model=True, max_tokens=16,
                     context_window=2048, temperature=0)
    engine = index.as_query_engine(llm=llm, node_postprocessors=[packer], similarity_top_k=10)
    question = nq_rows[0]["question"]

    response = engine.query(question)
    assert isinstance(response.response, str) and response.response.strip()

    retrieved = index.as_retriever(similarity_top_k=10).retrieve(question)
    assert len(retrieved) == 10
    packed, expected = packer.pack_nodes(retrieved, question)
    assert get_tokenizer(tokenizer).count(packed.prompt) == packed.debug_info.prompt_tokens <= BUDGET

    def seen(result):
        return [(n.node.node_id, n.node.get_content(metadata_mode=MetadataMode.NONE), n.node.metadata, n.score) for n in result]

    assert seen(response.source_nodes) == seen(expected)  # the LLM was given the packed nodes, in prompt order
    at = {n.node.node_id: i for i, n in enumerate(retrieved)}
    dropped = {d["input_index"]: d["reason"] for d in packed.debug_info.dropped}
    assert sorted([at[n.node.node_id] for n in response.source_nodes] + list(dropped)) == list(range(10))
    assert response.source_nodes and dropped and all(dropped.values())
    for n in response.source_nodes:
        original = retrieved[at[n.node.node_id]]
        assert n.score == original.score
        changed = n.node.get_content(metadata_mode=MetadataMode.NONE) != original.node.get_content(metadata_mode=MetadataMode.NONE)
        assert n.node.metadata == ({**original.node.metadata, "edgewise": n.node.metadata["edgewise"]} if changed
                                   else original.node.metadata)
    assert any("edgewise" in n.node.metadata for n in response.source_nodes)  # pruning (or a cut) changed a text here

    answered = asyncio.run(engine.aquery(question))  # the async path: aretrieve, apostprocess_nodes, the async client
    assert isinstance(answered.response, str) and answered.response.strip()
    assert seen(answered.source_nodes) == seen(expected)
