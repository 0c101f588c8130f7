"""EdgewisePromptBuilder in real Haystack: options, serialisation, the documents it hands back, and a
Pipeline (InMemoryBM25Retriever → EdgewisePromptBuilder → OpenAIChatGenerator) against the real
llama.cpp server with the bundled Gemma."""

import asyncio
import dataclasses
import os

import pytest

from edgewise import ConfigError, InputError
from edgewise.tokens.tokenizers import get_tokenizer

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # no telemetry calls from the tests
pytest.importorskip("haystack", reason="needs haystack-ai: pip install -e '.[haystack]'")

from haystack import Document, Pipeline  # noqa: E402
from haystack.components.generators.chat import OpenAIChatGenerator  # noqa: E402
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever  # noqa: E402
from haystack.dataclasses import ChatMessage, ChatRole  # noqa: E402
from haystack.document_stores.in_memory import InMemoryDocumentStore  # noqa: E402
from haystack.utils import Secret  # noqa: E402

from edgewise.integrations.haystack import EdgewisePromptBuilder  # noqa: E402

TYPE = "edgewise.integrations.haystack_builder.EdgewisePromptBuilder"
KEY_ENV = "EDGEWISE_TEST_LLM_KEY"  # an env-var secret serialises; a token secret would not
PARIS = "Paris is the capital of France. Bananas grow in warm places. The Louvre is in Paris."
DOCS = [
    Document(id="de", content="Berlin is the capital of Germany.", meta={"title": "Berlin", "n": 1}, score=0.4),
    Document(id="fr", content=PARIS, meta={"title": "Paris", "n": 2}, score=0.9),
    Document(id="it", content="Rome is the capital of Italy.", meta={"n": 3}, score=0.2),
]


@pytest.fixture(autouse=True)
def no_telemetry(monkeypatch):
    """Haystack reads its telemetry switch once, at import: off here whichever test imported it first."""
    monkeypatch.setattr("haystack.telemetry._telemetry.telemetry", None)


def words(**options):
    return EdgewisePromptBuilder(tokenizer="words", layout="paper", **options)


# -- options ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "error", "message"), [
    ({"budget": 0}, InputError, "budget must be > 0, but got 0"),
    ({"prune": 2}, InputError, "prune must be a threshold in [0, 1], but got 2"),
    ({"budgt": 100}, ConfigError, "unknown pack option 'budgt'; choose from: budget,"),
    ({"order": "nope"}, ConfigError, "unknown order 'nope'; choose one of: edges,"),
    ({"layout": "nope"}, ConfigError, "unknown layout 'nope'; choose one of: sections,"),
    ({"tokenizer": "nope"}, ConfigError, "unknown tokenizer 'nope'; choose one of: cl100k_base,"),
    ({"scorer": "nope"}, ConfigError, "unknown scorer 'nope'; choose one of: given,"),
    ({"model": "gpt-4o", "tokenizer": "cl100k_base"}, ConfigError, "tokenizer 'cl100k_base' is not the tokenizer of model 'gpt-4o'"),
])
def test_an_invalid_option_fails_when_the_component_is_built(options, error, message):
    with pytest.raises(error) as caught:
        EdgewisePromptBuilder(**options)
    assert str(caught.value).startswith(message)


def test_options_come_as_a_mapping_or_keywords_and_keywords_win():
    built = EdgewisePromptBuilder({"budget": 100, "order": "relevance"}, budget=200)
    assert built.packer.options.to_dict(changed_only=True) == {"budget": 200, "order": "relevance"}


def test_run_options_override_for_that_run_only():
    builder = words(budget=500, order="relevance")
    assert [d.id for d in builder.run(documents=DOCS, query="capital of France?", options={"order": "reverse"})["documents"]] \
        == ["it", "de", "fr"]
    assert [d.id for d in builder.run(documents=DOCS, query="capital of France?")["documents"]] == ["fr", "de", "it"]
    with pytest.raises(InputError, match=r"^top_k must be > 0, but got 0$"):
        builder.run(documents=DOCS, query="q", options={"top_k": 0})


# -- serialisation ------------------------------------------------------------------------------


def test_to_dict_writes_the_changed_options_and_from_dict_reads_them_back():
    builder = EdgewisePromptBuilder(budget=300, tokenizer="words", layout="paper", prune=0.3, prune_scorer="lexical")
    data = builder.to_dict()
    assert data == {"type": TYPE, "init_parameters": {"budget": 300, "tokenizer": "words", "layout": "paper",
                                                      "prune": 0.3, "prune_scorer": "lexical"}}
    again = EdgewisePromptBuilder.from_dict(data)
    assert again.to_dict() == data
    assert again.run(documents=DOCS, query="capital of France?") == builder.run(documents=DOCS, query="capital of France?")
    assert EdgewisePromptBuilder().to_dict() == {"type": TYPE, "init_parameters": {}}


def test_an_option_given_as_an_object_cannot_be_serialised():
    builder = EdgewisePromptBuilder(tokenizer=get_tokenizer("words"))
    with pytest.raises(ConfigError, match=r"^option tokenizer must be given by name to serialise the component, but got a "):
        builder.to_dict()


# -- what comes back ----------------------------------------------------------------------------


def test_the_placed_documents_keep_id_score_and_metadata_in_prompt_order():
    out = words(budget=500, order="relevance").run(documents=DOCS, query="capital of France?")
    assert out["documents"] == [DOCS[1], DOCS[0], DOCS[2]]  # unchanged text: the very documents
    assert out["debug_info"]["dropped"] == []
    assert [m.role for m in out["messages"]] == [ChatRole.USER]  # the paper layout has no system part
    assert out["messages"][0].text == out["prompt"]
    assert out["prompt"].splitlines()[2:5] == ["Document [1](Title: Paris) " + PARIS,
                                               "Document [2](Title: Berlin) Berlin is the capital of Germany.",
                                               "Document [3](Title: ) Rome is the capital of Italy."]


def test_the_sections_layout_gives_a_system_and_a_user_message():
    out = EdgewisePromptBuilder(budget=1000).run(documents=DOCS, query="capital of France?")
    system, user = out["messages"]
    assert (system.role, user.role) == (ChatRole.SYSTEM, ChatRole.USER)
    assert out["prompt"] == system.text + "\n\n" + user.text


def test_pruning_replaces_the_text_and_says_so_in_the_metadata():
    before = [dataclasses.replace(d) for d in DOCS]
    out = words(budget=500, order="relevance", prune=0.1, prune_scorer="lexical").run(documents=DOCS, query="capital of France?")
    fr = out["documents"][0]
    assert (fr.id, fr.score) == ("fr", 0.9)
    assert fr.content == "Paris is the capital of France."
    assert fr.meta == {"title": "Paris", "n": 2,
                       "edgewise": {"form": "whole", "pruned": True, "original_chars": len(PARIS), "chars": len(fr.content)}}
    assert out["documents"][1:] == [DOCS[0], DOCS[2]]  # one sentence each: nothing to prune
    assert DOCS == before  # the inputs are not modified


def test_a_cut_document_says_so_and_every_dropped_one_has_a_reason():
    long = Document(id="long", content=" ".join(f"w{i}" for i in range(200)), meta={"k": "v"}, score=0.95)
    out = words(budget=80, order="relevance").run(documents=[long, *DOCS], query="capital of France?")
    cut = out["documents"][0]
    assert (cut.id, cut.score, cut.meta["k"], cut.meta["edgewise"]["form"]) == ("long", 0.95, "v", "truncated")
    assert cut.meta["edgewise"] == {"form": "truncated", "pruned": False, "original_chars": len(long.content),
                                    "chars": len(cut.content)}
    assert long.content.startswith(cut.content) and len(cut.content) < len(long.content)
    placed = {d.id for d in out["documents"]}
    dropped = {d["input_index"]: d["reason"] for d in out["debug_info"]["dropped"]}
    assert placed == {"long"}
    assert dropped == dict.fromkeys([1, 2, 3], "budget exhausted: 1 tokens left, less than any chunk needs (4)")
    assert get_tokenizer("words").count(out["prompt"]) <= 80


def test_documents_sharing_an_id_are_both_packed_and_both_come_back():
    twin = Document(content="Paris is the capital of France.", score=0.5)
    same = Document(content="Paris is the capital of France.", score=0.3)  # same content: same id
    assert twin.id == same.id
    out = words(budget=500, order="relevance").run(documents=[twin, same], query="capital of France?")
    assert [(d.id, d.score) for d in out["documents"]] == [(twin.id, 0.5), (twin.id, 0.3)]
    assert out["debug_info"]["order"] == ["#0", "#1"]
    assert out["debug_info"]["dropped"] == []


def test_no_documents_gives_the_prompt_without_context():
    out = words(budget=100).run(documents=[], query="capital of France?")
    assert out["documents"] == []
    assert out["prompt"] == "Write a high-quality answer for the given question.\n\nQuestion: capital of France?\nAnswer:"
    assert out["debug_info"]["order"] == [] and out["debug_info"]["dropped"] == []


def test_a_document_without_text_is_an_error():
    with pytest.raises(InputError, match=r"^documents\[1\] \(id 'x'\) has no text content; EdgewisePromptBuilder packs text$"):
        words().run(documents=[DOCS[0], Document(id="x", content=None, score=0.1)], query="q")


def test_run_async_gives_what_run_gives():
    builder = words(budget=500, prune=0.1, prune_scorer="lexical")
    assert asyncio.run(builder.run_async(documents=DOCS, query="capital of France?")) == \
        builder.run(documents=DOCS, query="capital of France?")


def test_it_connects_where_prompt_builder_and_chat_prompt_builder_do(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "x")
    key = Secret.from_env_var(KEY_ENV)
    pipe = Pipeline()
    pipe.add_component("builder", EdgewisePromptBuilder(budget=500))
    pipe.add_component("chat", OpenAIChatGenerator(api_key=key, api_base_url="http://127.0.0.1:9/v1"))
    pipe.add_component("text", OpenAIChatGenerator(api_key=key, api_base_url="http://127.0.0.1:9/v1"))
    pipe.connect("builder.messages", "chat.messages")  # ChatPromptBuilder.prompt's place
    pipe.connect("builder.prompt", "text.messages")  # PromptBuilder.prompt's place (a chat generator takes a str too)
    assert sorted((a, b, c["from_socket"].name, c["to_socket"].name) for a, b, c in pipe.graph.edges(data=True)) == \
        [("builder", "chat", "messages", "messages"), ("builder", "text", "prompt", "messages")]


@pytest.mark.models
def test_warm_up_loads_the_scoring_model():
    builder = EdgewisePromptBuilder(scorer="dense", rescore=True)
    builder.warm_up()
    scorer = builder.packer.scorer(builder.packer.options)
    # the model embedded the warm-up text: it is in the cache, so nothing is computed now
    assert len(scorer.cache.get_many(["warm up"], lambda texts: pytest.fail(f"not warmed up: {texts}"))) == 1


# -- a real pipeline with a real LLM ------------------------------------------------------------


@pytest.fixture(scope="module")
def llm_url(tmp_path_factory):
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[eval]'")
    from ..servers import llama_cpp

    with llama_cpp(tmp_path_factory.mktemp("llama"), n_ctx=2048) as url:
        yield url


@pytest.fixture(scope="module")
def gemma_tokenizer():
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[eval]'")
    from edgewise.eval.backends import bundled_model_path

    return f"gguf:{bundled_model_path()}"


def nq_store(nq_rows, index):
    store = InMemoryDocumentStore(index=index)  # stores with one index name share their documents
    store.write_documents([Document(content=row["ctxs"][0]["text"], meta={"title": row["ctxs"][0]["title"], "row": n})
                           for n, row in enumerate(nq_rows[:30])])
    return store


def rag_pipeline(store, builder, url):
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(store, top_k=10))
    pipe.add_component("builder", builder)
    pipe.add_component("llm", OpenAIChatGenerator(
        api_key=Secret.from_env_var(KEY_ENV), model="gemma-3-270m", api_base_url=url,
        generation_kwargs={"max_tokens": 16, "temperature": 0}))
    pipe.connect("retriever.documents", "builder.documents")
    pipe.connect("builder.messages", "llm.messages")
    return pipe


BUDGET = 600


def comparable(pipeline_dict):
    """A pipeline's dict with its connections sorted (Haystack keeps no fixed order for them)."""
    return {**pipeline_dict, "connections": sorted(pipeline_dict["connections"], key=lambda c: (c["sender"], c["receiver"]))}


@pytest.mark.slow
def test_a_bm25_pipeline_packs_within_the_budget_and_the_llm_answers(nq_rows, llm_url, gemma_tokenizer, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "x")
    question = nq_rows[0]["question"]
    builder = EdgewisePromptBuilder(budget=BUDGET, tokenizer=gemma_tokenizer, prune=0.2, prune_scorer="lexical")
    pipe = rag_pipeline(nq_store(nq_rows, "edgewise-builder-sync"), builder, llm_url)
    inputs = {"retriever": {"query": question}, "builder": {"query": question}}
    result = pipe.run(inputs, include_outputs_from={"retriever", "builder"})

    reply = result["llm"]["replies"]
    assert [type(r) for r in reply] == [ChatMessage] and reply[0].role == ChatRole.ASSISTANT
    assert reply[0].text.strip() and reply[0].meta["model"] == "gemma-3-270m"

    out, retrieved = result["builder"], result["retriever"]["documents"]
    assert len(retrieved) == 10
    assert get_tokenizer(gemma_tokenizer).count(out["prompt"]) == out["debug_info"]["prompt_tokens"] <= BUDGET
    assert out["prompt"] == "\n\n".join(m.text for m in out["messages"])
    # every retrieved document is in the prompt or dropped with a reason
    at = {d.id: n for n, d in enumerate(retrieved)}
    dropped = {d["input_index"]: d["reason"] for d in out["debug_info"]["dropped"]}
    assert sorted([at[d.id] for d in out["documents"]] + list(dropped)) == list(range(10))
    assert out["documents"] and dropped and all(dropped.values())
    assert any("edgewise" in d.meta for d in out["documents"])  # pruning (or a cut) changed a text here
    for doc in out["documents"]:
        original = retrieved[at[doc.id]]
        assert (doc.id, doc.score) == (original.id, original.score)
        changed = doc.content != original.content
        assert doc.meta == ({**original.meta, "edgewise": doc.meta["edgewise"]} if changed else original.meta)
        assert doc.content in out["prompt"]

    # the pipeline dumps and loads to the same components, and runs to the same prompt
    loaded = Pipeline.loads(pipe.dumps(), allowed_modules=["edgewise"])  # Haystack loads trusted modules only
    assert comparable(loaded.to_dict()) == comparable(pipe.to_dict())
    assert loaded.get_component("builder").to_dict() == {
        "type": TYPE, "init_parameters": {"budget": BUDGET, "tokenizer": gemma_tokenizer, "prune": 0.2, "prune_scorer": "lexical"}}
    again = loaded.run(inputs, include_outputs_from={"builder"})
    assert again["builder"] == out
    assert again["llm"]["replies"][0].text.strip()


@pytest.mark.slow
def test_an_async_pipeline_packs_the_same_prompt_and_the_llm_answers(nq_rows, llm_url, gemma_tokenizer, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "x")
    question = nq_rows[1]["question"]
    store = nq_store(nq_rows, "edgewise-builder-async")
    builder = EdgewisePromptBuilder(budget=BUDGET, tokenizer=gemma_tokenizer, order="relevance")
    inputs = {"retriever": {"query": question}, "builder": {"query": question}}
    pipe = rag_pipeline(store, builder, llm_url)
    got = asyncio.run(pipe.run_async(inputs, include_outputs_from={"builder"}))  # Haystack 3: one Pipeline, both ways
    assert got["builder"] == pipe.run(inputs, include_outputs_from={"builder"})["builder"]
    assert [type(r) for r in got["llm"]["replies"]] == [ChatMessage] and got["llm"]["replies"][0].text.strip()
