"""LangChain packing components: ``EdgewisePacker`` (a Runnable: question + documents → a packed
``ChatPromptValue``), ``EdgewiseCompressor`` (a document compressor for
``ContextualCompressionRetriever``) and ``EdgewiseEmbeddings`` (the bundled MiniLM as LangChain
``Embeddings``, for an offline vector store).

Both components take the options of :func:`edgewise.pack` (``budget``, ``tokenizer``, ``scorer``,
``prune``, ``order``, ``layout``, ...), as an ``options`` mapping or :class:`~edgewise.PackOptions`
and/or keywords, checked when the component is built (an unknown option or name raises an
:class:`~edgewise.EdgewiseError` there, not at the first call). A document's score is its
``metadata["relevance_score"]`` when it has one (the key LangChain's rerankers write); ids and
metadata come back intact. A document whose text was pruned, summarised or cut comes back as a copy
with the placed text and ``metadata["edgewise"]`` saying so (``form``, ``pruned``,
``original_chars``, ``chars``); when edgewise's scorer ranked the documents, the copy also carries
``metadata["relevance_score"]``.

Where the debug info goes (every document's fate: placed, summarised, truncated, or dropped with
its reason; the prompt's exact token count):

- ``EdgewisePacker``: in the human message's ``response_metadata["edgewise"]``
  (``DebugInfo.to_dict()``). It travels with the prompt value, so it is readable from the packer's
  output, from any step after it, and by callback handlers and tracers, which receive the messages
  (``on_chat_model_start``); and no chat model sends ``response_metadata`` to the provider, whereas
  ``additional_kwargs`` may be sent as payload.
- both components: a LangChain custom event named ``"edgewise"`` whose data is that same dict, for
  ``on_custom_event`` handlers and ``astream_events``; the compressor returns plain documents, so the
  event (or :meth:`EdgewiseCompressor.compress_with_debug`) is where its dropped documents are listed.

Needs ``pip install -e '.[langchain]'`` (in an edgewise checkout).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InputError, missing_extra
from ..options import PackOptions
from ..packing.debug import DebugInfo
from ..packing.packer import Packed, Packer
from .documents import META_KEY, Doc, pack_docs

try:
    from langchain_core.callbacks import BaseCallbackManager, Callbacks
    from langchain_core.callbacks.manager import adispatch_custom_event, dispatch_custom_event
    from langchain_core.documents import BaseDocumentCompressor, Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_core.prompt_values import ChatPromptValue
    from langchain_core.runnables import RunnableConfig, RunnableSerializable
    from langchain_core.runnables.config import run_in_executor
    from pydantic import BaseModel, ConfigDict, PrivateAttr, create_model
except ImportError:  # pragma: no cover
    raise missing_extra("the LangChain components", "langchain-core", "langchain") from None

EVENT = "edgewise"  # the custom event both components dispatch, with DebugInfo.to_dict() as data
SCORE_KEY = "relevance_score"  # a document's score in its metadata (LangChain rerankers' key)


def as_docs(documents: Any, what: str) -> list[Doc]:
    """LangChain documents as edgewise sees them: id, text, ``metadata["relevance_score"]``, ``metadata["title"]``."""
    if isinstance(documents, (str, bytes, Mapping)) or not isinstance(documents, Sequence):
        raise InputError(f"{what} must be a list of LangChain Document, but got {type(documents).__name__}")
    out = []
    for n, d in enumerate(documents):
        if not isinstance(d, Document):
            raise InputError(f"{what}[{n}] must be a LangChain Document, but got {type(d).__name__}")
        score = d.metadata.get(SCORE_KEY)
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
            raise InputError(f"{what}[{n}].metadata[{SCORE_KEY!r}] must be a number, but got {score!r}")
        title = d.metadata.get("title")
        out.append(Doc(d.id, d.page_content, score, title if isinstance(title, str) else None))
    return out


def placed_documents(documents: Sequence[Document], packed: Packed, placed: Sequence[Any]) -> list[Document]:
    """The documents in the prompt, in prompt order: the originals when unchanged, else copies with
    the placed text, ``metadata["edgewise"]`` and (when edgewise scored them) ``relevance_score``."""
    info = packed.debug_info
    scored = info.scorer not in ("given", "input order")
    out = []
    for p in placed:
        doc = documents[p.index]
        if not (p.changed or scored):
            out.append(doc)
            continue
        meta = dict(doc.metadata)
        if scored:
            meta[SCORE_KEY] = info.chunks[p.index]["score"]
        if p.changed:
            meta[META_KEY] = p.meta(doc.page_content)
        out.append(doc.model_copy(update={"page_content": p.text, "metadata": meta}))
    return out


def _has_run(callbacks: Callbacks) -> bool:
    return isinstance(callbacks, BaseCallbackManager) and callbacks.parent_run_id is not None


class _PackingComponent(BaseModel):
    """The packer both components hold, built (and its options checked) at construction."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    _packer: Packer = PrivateAttr()

    def __init__(self, options: PackOptions | Mapping[str, Any] | None = None, **overrides: Any) -> None:
        super().__init__()
        self._packer = Packer(options, **overrides)

    @property
    def options(self) -> PackOptions:
        """The pack options, validated."""
        return self._packer.options

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.options.to_dict(changed_only=True).items())
        return f"{type(self).__name__}({shown})"


class EdgewisePacker(_PackingComponent, RunnableSerializable[dict[str, Any], ChatPromptValue]):
    """``{"question": str, "documents": [Document, ...]}`` → a ``ChatPromptValue`` (system message
    when the layout has one, then the human message) within the budget; pipe it into a chat model.

    >>> from langchain_core.documents import Document
    >>> packer = EdgewisePacker(budget=60, tokenizer="words", layout="paper")
    >>> value = packer.invoke({"question": "capital of France?", "documents": [
    ...     Document(page_content="Paris is the capital.", metadata={"relevance_score": 0.9}),
    ...     Document(page_content="Bananas are yellow.", metadata={"relevance_score": 0.1})]})
    >>> [m.type for m in value.messages]
    ['human']
    >>> info = value.messages[-1].response_metadata["edgewise"]
    >>> info["order"], info["prompt_tokens"] <= 60
    (['#0', '#1'], True)
    """

    @property
    def InputType(self) -> Any:  # noqa: N802 (LangChain's name)
        return dict[str, Any]

    @property
    def OutputType(self) -> Any:  # noqa: N802
        return ChatPromptValue

    def get_input_schema(self, config: RunnableConfig | None = None) -> type[BaseModel]:
        return create_model("EdgewisePackerInput", question=(str, ...), documents=(list[Document], ...))

    def pack(self, question: str, documents: Sequence[Document]) -> ChatPromptValue:
        """The packed prompt for ``question`` over ``documents`` (what :meth:`invoke` returns)."""
        packed, _ = pack_docs(self._packer, question, as_docs(documents, "documents"))
        info = packed.debug_info.to_dict()
        system, user = packed.rendered.system, packed.rendered.user
        head = [SystemMessage(content=system)] if system else []
        return ChatPromptValue(messages=[*head, HumanMessage(content=user, response_metadata={EVENT: info})])

    def _from_input(self, input: Any) -> ChatPromptValue:
        if not isinstance(input, Mapping) or "question" not in input or "documents" not in input:
            got = sorted(input) if isinstance(input, Mapping) else type(input).__name__
            raise InputError(f"EdgewisePacker input must be a dict with 'question' and 'documents', but got {got}")
        return self.pack(input["question"], input["documents"])

    def _run(self, input: Any) -> ChatPromptValue:
        value = self._from_input(input)
        dispatch_custom_event(EVENT, value.messages[-1].response_metadata[EVENT])
        return value

    async def _arun(self, input: Any) -> ChatPromptValue:
        value = await run_in_executor(None, self._from_input, input)  # CPU work off the event loop
        await adispatch_custom_event(EVENT, value.messages[-1].response_metadata[EVENT])
        return value

    def invoke(self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any) -> ChatPromptValue:
        return self._call_with_config(self._run, input, config, run_type="prompt")

    async def ainvoke(self, input: dict[str, Any], config: RunnableConfig | None = None,
                      **kwargs: Any) -> ChatPromptValue:
        return await self._acall_with_config(self._arun, input, config, run_type="prompt")


class EdgewiseCompressor(_PackingComponent, BaseDocumentCompressor):
    """Prune, select under the budget and order retrieved documents: the kept ones, in prompt order.

    The budget is that of the prompt edgewise would render for the query with these options
    (layout, system, instructions included), so the documents returned are the ones that fit there.

    >>> from langchain_core.documents import Document
    >>> docs = [Document(page_content=t, id=str(n)) for n, t in enumerate(
    ...     ["Bananas are yellow.", "Paris is the capital of France.", "France borders Spain."])]
    >>> kept = EdgewiseCompressor(scorer="bm25", top_k=2, tokenizer="words").compress_documents(docs, "capital of France")
    >>> [(d.id, d.metadata["relevance_score"] > 0) for d in kept]
    [('1', True), ('2', True)]
    """

    def compress_with_debug(self, documents: Sequence[Document], query: str) -> tuple[list[Document], DebugInfo]:
        """The kept documents (prompt order) and the debug info: where every input document went."""
        docs = list(documents)
        packed, placed = pack_docs(self._packer, query, as_docs(docs, "documents"))
        return placed_documents(docs, packed, placed), packed.debug_info

    def compress_documents(self, documents: Sequence[Document], query: str,
                           callbacks: Callbacks | None = None) -> Sequence[Document]:
        kept, info = self.compress_with_debug(documents, query)
        if _has_run(callbacks):
            dispatch_custom_event(EVENT, info.to_dict(), config={"callbacks": callbacks})
        return kept

    async def acompress_documents(self, documents: Sequence[Document], query: str,
                                  callbacks: Callbacks | None = None) -> Sequence[Document]:
        kept, info = await run_in_executor(None, self.compress_with_debug, documents, query)
        if _has_run(callbacks):
            await adispatch_custom_event(EVENT, info.to_dict(), config={"callbacks": callbacks})
        return kept


class EdgewiseEmbeddings(Embeddings):
    """The bundled all-MiniLM-L6-v2 (int8 ONNX, extra ``models``) as LangChain ``Embeddings``: a
    vector store that runs offline (no download), with the vectors edgewise's ``dense`` scorer uses.

    >>> vecs = EdgewiseEmbeddings().embed_documents(["Paris is the capital of France."])
    >>> len(vecs), len(vecs[0])
    (1, 384)
    """

    def __init__(self, precision: str | None = None) -> None:
        from ..score.dense import shared_dense

        self.scorer = shared_dense(precision)  # the model loads on the first text

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.scorer.embed(list(texts)).tolist() if texts else []

    def embed_query(self, text: str) -> list[float]:
        return self.scorer.embed([text])[0].tolist()


__all__ = ["EVENT", "SCORE_KEY", "EdgewiseCompressor", "EdgewiseEmbeddings", "EdgewisePacker", "as_docs",
           "placed_documents"]
