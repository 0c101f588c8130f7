"""EdgewiseRanker beside Haystack's own LostInTheMiddleRanker, case by case.

Every case of Haystack's test file for LostInTheMiddleRanker (test/components/rankers/
test_lost_in_the_middle.py, in its 2.x and 3.x versions) is run here on both components with the
same input: the outputs must be the same documents in the same order, and an error must be of the
same type (ours is also an EdgewiseError) with the same message. Then what that file does not try:
float thresholds, overrides at run time, duplicates, pipelines, and random input.
"""

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise import EdgewiseError

pytest.importorskip("haystack", reason="needs haystack-ai: pip install -e '.[haystack]'")

from haystack import Document, Pipeline  # noqa: E402
from haystack.components.builders import PromptBuilder  # noqa: E402
from haystack.components.rankers import LostInTheMiddleRanker  # noqa: E402
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever  # noqa: E402
from haystack.core.errors import DeserializationError  # noqa: E402
from haystack.core.serialization import component_to_dict  # noqa: E402
from haystack.document_stores.in_memory import InMemoryDocumentStore  # noqa: E402

from edgewise.integrations.haystack import EdgewiseRanker  # noqa: E402

NOT_TEXT = "Some provided documents are not textual; LostInTheMiddleRanker can process only text."


def outcome(cls, init, documents, **run):
    """What ``cls(**init).run(documents=documents, **run)`` gives: the documents, or where and what it raised."""
    try:
        ranker = cls(**init)
    except Exception as error:  # noqa: BLE001 - the error is the outcome under test
        return "init", error
    try:
        return "run", ranker.run(documents=documents, **run)["documents"]
    except Exception as error:  # noqa: BLE001
        return "run", error


def same(documents, init=None, **run):
    """Run both components on the same input and assert the same outcome; return it."""
    init = init or {}
    theirs = outcome(LostInTheMiddleRanker, init, documents, **run)
    ours = outcome(EdgewiseRanker, init, documents, **run)
    assert ours[0] == theirs[0]
    if isinstance(theirs[1], Exception):
        assert isinstance(ours[1], type(theirs[1])) and isinstance(ours[1], EdgewiseError), (ours[1], theirs[1])
        assert str(ours[1]) == str(theirs[1])
    else:
        assert not isinstance(ours[1], Exception), ours[1]
        assert [id(d) for d in ours[1]] == [id(d) for d in theirs[1]]  # the very objects, in the same order
    return ours[1]


def contents(docs):
    return [d.content for d in docs]


def numbered(n, prefix=""):
    return [Document(content=f"{prefix}{i}") for i in range(1, n + 1)]


# --- the cases of Haystack's test file -------------------------------------------------------------


def test_odd_number_of_documents():
    assert contents(same(numbered(9))) == "1 3 5 7 9 8 6 4 2".split()


def test_even_number_of_documents():
    assert contents(same(numbered(10))) == "1 3 5 7 9 10 8 6 4 2".split()


def test_two_documents_keep_their_order():
    assert contents(same(numbered(2))) == ["1", "2"]


def test_init_stores_the_parameters_as_given():
    for init in ({}, {"word_count_threshold": 10}, {"top_k": 3}, {"word_count_threshold": 2.5, "top_k": 4}):
        theirs, ours = LostInTheMiddleRanker(**init), EdgewiseRanker(**init)
        assert (ours.word_count_threshold, ours.top_k) == (theirs.word_count_threshold, theirs.top_k)
    assert (EdgewiseRanker().word_count_threshold, EdgewiseRanker(word_count_threshold=10).word_count_threshold) == (None, 10)


@pytest.mark.parametrize("value", [0, -5, -1, False])
def test_a_threshold_that_is_an_integer_below_one_is_refused_at_init_with_haystacks_message(value):
    error = same(numbered(3), {"word_count_threshold": value})
    assert str(error) == f"Invalid value for word_count_threshold: {value}. word_count_threshold must be > 0."


@pytest.mark.parametrize("value", [0, -5])
def test_a_threshold_that_is_an_integer_below_one_is_refused_at_run_with_haystacks_message(value):
    error = same(numbered(3), word_count_threshold=value)
    assert str(error) == f"Invalid value for word_count_threshold: {value}. word_count_threshold must be > 0."


@pytest.mark.parametrize(("threshold", "expected"), [
    (6, "word1 word3 word5 word6 word4 word2"),
    (9, "word1 word3 word5 word7 word9 word8 word6 word4 word2"),
    (100, "word1 word3 word5 word7 word9 word8 word6 word4 word2"),
])
def test_word_count_threshold(threshold, expected):
    assert contents(same(numbered(9, "word"), {"word_count_threshold": threshold})) == expected.split()


def test_no_documents_give_no_documents():
    assert EdgewiseRanker().run(documents=[]) == {"documents": []}
    assert same([]) == []


def test_one_document_comes_back_as_it_is():
    doc = Document(content="test")
    assert EdgewiseRanker().run(documents=[doc]) == {"documents": [doc]}
    assert same([doc]) == [doc]


@pytest.mark.parametrize("top_k", [1, 2, 3, 4, 5, 6, 7, 8, 12, 20])
def test_top_k_is_running_on_the_first_k(top_k):
    docs = numbered(9)
    ours = same(docs, top_k=top_k)
    assert contents(ours) == contents(EdgewiseRanker().run(documents=docs[:top_k])["documents"])
    assert len(ours) == min(top_k, 9)


@pytest.mark.parametrize("top_k", [-20, -10, -5, -1, 0])
def test_a_top_k_below_one_is_refused_at_run_and_at_init(top_k):
    assert str(same(numbered(9), top_k=top_k)) == f"top_k must be > 0, but got {top_k}"
    assert str(same(numbered(9), {"top_k": top_k})) == f"top_k must be > 0, but got {top_k}"


@pytest.mark.parametrize("docs", [
    [Document(content="text"), Document(content=None)],
    [Document(content=None)],  # refused even alone
    [Document(content=None), Document(content="a"), Document(content="b")],
])
def test_documents_without_text_are_refused_with_haystacks_message(docs):
    assert str(same(docs)) == NOT_TEXT
    assert str(same(docs, {"top_k": 1})) == NOT_TEXT  # checked before top_k cuts the list


def test_serialised_with_haystacks_parameters_and_ours():
    theirs = component_to_dict(LostInTheMiddleRanker(), "ranker")
    assert theirs["init_parameters"] == {"word_count_threshold": None, "top_k": None}
    assert component_to_dict(EdgewiseRanker(), "ranker") == {
        "type": "edgewise.integrations.haystack.EdgewiseRanker",
        "init_parameters": {**theirs["init_parameters"], "budget": None, "tokenizer": "cl100k_base", "order": "edges"},
    }


def build_pipeline(ranker, template=None):
    store = InMemoryDocumentStore()
    store.write_documents([Document(content=t) for t in ["Paris is in France", "Berlin is in Germany", "Lyon is in France"]])
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store))
    pipe.add_component("ranker", ranker)
    pipe.connect("retriever.documents", "ranker.documents")
    if template:
        pipe.add_component("prompt_builder", PromptBuilder(template=template, required_variables=["question"]))
        pipe.connect("ranker.documents", "prompt_builder.documents")
    return pipe


def test_in_a_retrieval_pipeline():
    data = {"retriever": {"query": "Cities in France", "top_k": 3}, "ranker": {"top_k": 2}}
    theirs = build_pipeline(LostInTheMiddleRanker()).run(data)
    ours = build_pipeline(EdgewiseRanker()).run(data)
    assert contents(ours["ranker"]["documents"]) == contents(theirs["ranker"]["documents"])
    assert contents(ours["ranker"]["documents"]) == ["Paris is in France", "Lyon is in France"]


def test_in_a_rag_pipeline_the_prompt_is_the_same():
    template = "Documents:\n{% for doc in documents %}{{ doc.content }}\n{% endfor %}Question: {{ question }}"
    question = "Who lives in France?"
    data = {"retriever": {"query": question}, "ranker": {"top_k": 2}, "prompt_builder": {"question": question}}
    theirs = build_pipeline(LostInTheMiddleRanker(), template).run(data)
    ours = build_pipeline(EdgewiseRanker(), template).run(data)
    assert ours == theirs
    assert ours["prompt_builder"]["prompt"] == (
        "Documents:\nParis is in France\nLyon is in France\nQuestion: Who lives in France?"
    )


# --- beyond that file: what Haystack also accepts ---------------------------------------------------


@pytest.mark.parametrize("threshold", [0.5, 1.0, 2.5, 3.0, 4.5, 5.999, 100.0, 0.0, -1.5, -math.inf, math.inf, math.nan, True])
@pytest.mark.parametrize("where", ["init", "run"])
def test_any_real_threshold_is_accepted_as_haystack_accepts_it(threshold, where):
    docs = [Document(content=t) for t in ["a b", "", "c", "d e f", "   ", "g"]]
    init, run = ({"word_count_threshold": threshold}, {}) if where == "init" else ({}, {"word_count_threshold": threshold})
    same(docs, init, **run)
    same([Document(content=""), *docs], init, **run)  # the first document without text


@pytest.mark.parametrize(("init", "run", "expected"), [
    ({"word_count_threshold": 2.5}, {}, ["a b", "c"]),
    ({"word_count_threshold": 3.5}, {}, ["a b", "d e", "c"]),
    ({"word_count_threshold": 100}, {"word_count_threshold": 1.5}, ["a b"]),  # the run value wins
    ({"word_count_threshold": 3}, {"word_count_threshold": 0.0}, ["a b", "c"]),  # 0.0 falls back, as there
    ({"top_k": 2}, {"top_k": 0.0}, ["a b", "c"]),
    ({"top_k": 3}, {"top_k": 1}, ["a b"]),
    ({"top_k": True}, {}, ["a b"]),
    ({}, {"word_count_threshold": -0.5}, ["a b"]),
])
def test_run_values_override_init_values_as_in_haystack(init, run, expected):
    docs = [Document(content=t) for t in ["a b", "c", "d e", "f"]]
    assert contents(same(docs, init, **run)) == expected


def test_duplicates_keep_the_highest_score_at_the_first_place():
    docs = [
        Document(id="a", content="LOW", score=0.1), Document(id="b", content="B", score=0.5),
        Document(id="a", content="HIGH", score=0.9), Document(id="c", content="C"), Document(id="c", content="C2"),
    ]
    assert contents(same(docs)) == ["HIGH", "C", "B"]


@pytest.mark.parametrize(("init", "run", "message"), [
    ({"top_k": 2.5}, {}, "top_k must be an integer > 0, but got 2.5"),
    ({"word_count_threshold": "5"}, {}, "word_count_threshold must be a number > 0, but got '5'"),
    ({}, {"top_k": 1.5}, "top_k must be an integer > 0, but got 1.5"),
    ({}, {"word_count_threshold": [3]}, "word_count_threshold must be a number > 0, but got [3]"),
])
def test_what_haystack_crashes_on_is_an_input_error_stating_the_rule(init, run, message):
    docs = numbered(3)
    with pytest.raises(TypeError):  # Haystack: a bare TypeError from slicing or comparing
        LostInTheMiddleRanker(**init).run(documents=docs, **run)
    with pytest.raises(EdgewiseError, match="^" + re.escape(message) + "$"):
        EdgewiseRanker(**init).run(documents=docs, **run)


TEXTS = st.sampled_from(["", " ", "alpha", "beta gamma", "delta epsilon zeta", "eta theta iota kappa"])
THRESHOLDS = st.one_of(st.none(), st.integers(1, 12), st.floats(-3, 12, allow_nan=False), st.just(0.0), st.just(math.nan))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(TEXTS, st.sampled_from(["a", "b", "c", "d", "e", "f", None]), st.one_of(st.none(), st.floats(0, 1))), max_size=10),
    st.one_of(st.none(), st.integers(-2, 12)), st.one_of(st.none(), st.integers(-2, 12)), THRESHOLDS, THRESHOLDS,
)
def test_random_input_gives_the_same_outcome(rows, init_top_k, run_top_k, init_threshold, run_threshold):
    docs = [Document(content=t, id=i, score=s) if i else Document(content=t, score=s) for t, i, s in rows]
    same(docs, {"top_k": init_top_k, "word_count_threshold": init_threshold}, top_k=run_top_k, word_count_threshold=run_threshold)


# --- saving and loading a pipeline -----------------------------------------------------------------


def test_a_saved_pipeline_loads_when_edgewise_is_on_haystacks_allowlist(monkeypatch):
    monkeypatch.delenv("HAYSTACK_DESERIALIZATION_ALLOWLIST", raising=False)
    pipe = Pipeline()
    pipe.add_component("ranker", EdgewiseRanker(top_k=3, budget=50, order="edges"))
    saved = pipe.dumps()
    with pytest.raises(DeserializationError, match="Refusing to deserialize a class from module 'edgewise.integrations.haystack'"):
        Pipeline.loads(saved)
    docs = numbered(5)
    for loaded in (Pipeline.loads(saved, allowed_modules=["edgewise"]),
                   Pipeline.loads(saved, allowed_modules=["edgewise.integrations.haystack"])):
        ranker = loaded.get_component("ranker")
        assert (type(ranker), ranker.top_k, ranker.budget, ranker.order) == (EdgewiseRanker, 3, 50, "edges")
        assert contents(loaded.run({"ranker": {"documents": docs}})["ranker"]["documents"]) == ["1", "3", "2"]
        assert loaded.dumps() == saved
    monkeypatch.setenv("HAYSTACK_DESERIALIZATION_ALLOWLIST", "edgewise.*")
    assert Pipeline.loads(saved).dumps() == saved
