"""``order="auto"`` with a ``model`` in the framework components that pack (Haystack's
``EdgewisePromptBuilder``, LangChain's ``EdgewisePacker`` and ``EdgewiseCompressor``, LlamaIndex's
``EdgewisePacker``): the documents come back in the order the model's profile gives, and the debug
info is what ``pack()`` gives, its ``placement`` included. The reorder adapters take no model:
there ``auto`` is ``edges``.

The profile is synthetic (``tests/position_profiles.py``), in a directory ``$EDGEWISE_PROFILES`` names.
"""

from __future__ import annotations

import pytest

import edgewise

from ..position_profiles import CHUNKS, PLACED_BY_EDGES, PLACED_BY_LAST_BEST, QUERY, placement, write_profile

pytest.importorskip("haystack", reason="needs haystack-ai: pip install -e '.[haystack]'")
pytest.importorskip("langchain_core", reason="needs langchain-core: pip install -e '.[langchain]'")
pytest.importorskip("llama_index.core", reason="needs llama-index-core: pip install -e '.[llamaindex]'")

from haystack import Document  # noqa: E402
from langchain_core.documents import Document as LCDocument  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402

from edgewise.integrations.haystack import EdgewiseRanker  # noqa: E402
from edgewise.integrations.haystack_builder import EdgewisePromptBuilder  # noqa: E402
from edgewise.integrations.langchain import EdgewiseCompressor, EdgewisePacker, EdgewiseReorder  # noqa: E402
from edgewise.integrations.llamaindex import EdgewiseReorder as LIReorder  # noqa: E402
from edgewise.integrations.llamaindex_packer import EdgewisePacker as LIPacker  # noqa: E402

OPTIONS = {"model": "gpt-4o", "order": "auto", "layout": "paper"}


@pytest.fixture
def profile_path(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEWISE_PROFILES", str(tmp_path / "env"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return write_profile(tmp_path / "env")


@pytest.fixture
def expected(profile_path):
    """The debug info pack() gives for the documents, which places them by the profile."""
    info = edgewise.pack(QUERY, CHUNKS, **OPTIONS).debug_info.to_dict()
    assert (info["order"], info["placement"]) == (PLACED_BY_LAST_BEST, placement(profile_path, "profile gpt-4o/qa-paper-4"))
    return info


def test_haystack_prompt_builder(expected):
    docs = [Document(id=c["id"], content=c["text"], score=c["score"]) for c in CHUNKS]
    builder = EdgewisePromptBuilder(**OPTIONS)
    out = builder.run(query=QUERY, documents=docs)
    assert ([d.id for d in out["documents"]], out["debug_info"]) == (PLACED_BY_LAST_BEST, expected)
    again = EdgewisePromptBuilder.from_dict(builder.to_dict())  # as a pipeline's YAML would rebuild it
    assert again.run(query=QUERY, documents=docs)["debug_info"] == expected


def lc_docs():
    return [LCDocument(id=c["id"], page_content=c["text"], metadata={"relevance_score": c["score"]}) for c in CHUNKS]


def test_langchain_packer_and_compressor(expected):
    value = EdgewisePacker(**OPTIONS).invoke({"question": QUERY, "documents": lc_docs()})
    assert value.messages[-1].response_metadata["edgewise"] == expected
    kept, info = EdgewiseCompressor(**OPTIONS).compress_with_debug(lc_docs(), QUERY)
    assert ([d.id for d in kept], info.to_dict()) == (PLACED_BY_LAST_BEST, expected)


def test_llamaindex_packer(expected):
    nodes = [NodeWithScore(node=TextNode(id_=c["id"], text=c["text"]), score=c["score"]) for c in CHUNKS]
    packed, out = LIPacker(**OPTIONS).pack_nodes(nodes, QUERY)
    assert ([n.node.node_id for n in out], packed.debug_info.to_dict()) == (PLACED_BY_LAST_BEST, expected)


def test_the_reorder_adapters_have_no_model_so_auto_is_edges(profile_path):
    hs = [Document(id=c["id"], content=c["text"], score=c["score"]) for c in CHUNKS]
    assert [d.id for d in EdgewiseRanker(order="auto").run(documents=hs)["documents"]] == PLACED_BY_EDGES
    assert [d.id for d in EdgewiseReorder(order="auto").transform_documents(lc_docs())] == PLACED_BY_EDGES
    nodes = [NodeWithScore(node=TextNode(id_=c["id"], text=c["text"]), score=c["score"]) for c in CHUNKS]
    assert [n.node.node_id for n in LIReorder(order="auto").postprocess_nodes(nodes)] == PLACED_BY_EDGES
