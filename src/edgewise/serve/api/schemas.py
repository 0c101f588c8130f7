"""Request and response bodies of the HTTP API, for validation and for ``/openapi.json``.

The pack options are not listed here: their schema is :meth:`PackOptions.json_schema` (one
property per option, with its type, bounds, choices, default and help), put into the OpenAPI
document as is, and their values are checked by :meth:`PackOptions.from_dict`, so a bad option
gets the library's message (rule and value). The same goes for the single options other endpoints
take (``scorer``, ``threshold`` ...): their schema is the option's. Pydantic checks only the
shape around them (a string query, a list of chunks); the chunks themselves are checked by
:func:`edgewise.chunk.normalize`.

>>> PackRequest.model_validate({"query": "q", "chunks": ["a"], "options": {"budget": 9}}).options
{'budget': 9}

The LLM-summary options are left out (a request may not set them, :mod:`edgewise.serve.api.assets`),
and so is ``summaries="llm"``:

>>> sorted(options_schema()["properties"]) == sorted(set(PackOptions.names()) - set(LLM_SUMMARY_OPTIONS))
True
>>> options_schema()["properties"]["summaries"]["enum"]
['given', 'auto']
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from ...index.search import MODES, TOP_N
from ...options import PackOptions
from ...prune.steps import DEFAULT_THRESHOLD
from .assets import LLM_SUMMARY_OPTIONS


def options_schema(exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """PackOptions' JSON Schema as an OpenAPI component (``exclude``: options an endpoint sets itself)."""
    schema = copy.deepcopy(PackOptions.json_schema())
    schema.pop("$schema", None)
    for name in (*exclude, *LLM_SUMMARY_OPTIONS):
        schema["properties"].pop(name)
    summaries = schema["properties"]["summaries"]
    summaries["enum"] = [v for v in summaries["enum"] if v != "llm"]  # not served: see serve.api.assets
    return schema


def option_schema(name: str, default: Any = None) -> dict[str, Any]:
    """One option's schema, with another default (and then not nullable) where an endpoint has one."""
    schema = copy.deepcopy(PackOptions.json_schema()["properties"][name])
    if default is not None:
        schema = {**next(s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"),
                  "description": schema["description"], "default": default}
    return schema


CHUNK_SCHEMA: dict[str, Any] = {
    "description": "a retrieved passage: a string, or an object with at least 'text' (as `edgewise pack` reads)",
    "anyOf": [
        {"type": "string"},
        {"type": "object", "required": ["text"], "properties": {
            "id": {"anyOf": [{"type": "string"}, {"type": "integer"}], "description": "default chunk-<index>"},
            "text": {"type": "string"},
            "score": {"anyOf": [{"type": "number"}, {"type": "null"}], "description": "the retriever's score"},
            "title": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "tokens": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
            "meta": {"type": "object", "description": "kept as given; meta.summary is a given summary"},
        }},
    ],
}

Chunks = Annotated[list[Annotated[Any, WithJsonSchema(CHUNK_SCHEMA)]], Field(description="the chunks, in input order")]
Options = Annotated[dict[str, Any], WithJsonSchema(options_schema())]
VariantOptions = Annotated[dict[str, Any], WithJsonSchema({**options_schema(exclude=("order", "key_id")),
                                                           "title": "VariantOptions"})]
Query = Annotated[str, Field(description="the question")]
MessagesFormat = Literal["openai", "anthropic"]


def _option(name: str, default: Any) -> Any:
    return Annotated[Any, WithJsonSchema(option_schema(name, default))]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class PackRequest(_Request):
    query: Query
    chunks: Chunks
    options: Options = {}
    messages_format: MessagesFormat = "openai"


class VariantsRequest(_Request):
    query: Query
    chunks: Chunks
    key_id: Annotated[str, Field(description="the chunk whose position varies")]
    positions: list[str | int] = Field(default=["first", "middle", "last"],
                                       description="first, middle, last, an index, or A, B, C (sections layout)")
    options: VariantOptions = {}
    messages_format: MessagesFormat = "openai"


class ScoreRequest(_Request):
    query: Query
    chunks: Chunks
    scorer: _option("scorer", "bm25") = "bm25"
    sort: bool = Field(default=False, description="best first (default: input order)")


class PruneRequest(_Request):
    query: Query
    chunks: Chunks
    threshold: _option("prune", DEFAULT_THRESHOLD) = DEFAULT_THRESHOLD
    relative: bool = Field(default=False, description="the threshold is relative to each chunk's best sentence")
    scorer: _option("prune_scorer", "auto") = "auto"


class HighlightRequest(_Request):
    query: Query
    text: str | None = Field(default=None, description="a text to highlight, instead of chunks")
    chunks: Annotated[list[Annotated[Any, WithJsonSchema(CHUNK_SCHEMA)]] | None, Field(description="chunks")] = None
    threshold: _option("prune", DEFAULT_THRESHOLD) = DEFAULT_THRESHOLD
    scorer: _option("prune_scorer", "auto") = "auto"


class TokensRequest(_Request):
    text: str
    tokenizer: _option("tokenizer", "cl100k_base") = "cl100k_base"
    max_tokens: int | None = Field(default=None, ge=0, description="also return the text cut to this many tokens")


class RetrieveRequest(_Request):
    question: Annotated[str, Field(description="the question (edgewise retrieve's QUESTION)")]
    top_n: Annotated[Any, WithJsonSchema({"type": "integer", "minimum": 1, "default": TOP_N})] = Field(
        default=TOP_N, description="hits to return, best first (at most --max-chunks)")
    mode: Annotated[Any, WithJsonSchema({"enum": list(MODES), "default": "hybrid"})] = Field(
        default="hybrid", description="dense + BM25 fused (hybrid), or one of them")


# -- responses (documentation; the handlers build plain dicts) -----------------------------------

class ErrorDetail(BaseModel):
    type: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


class PackResult(BaseModel):
    prompt: str
    messages: list[dict[str, Any]] | dict[str, Any]
    debug_info: dict[str, Any]


class HighlightResult(BaseModel):
    id: str
    spans: list[dict[str, Any]]


class TokensResult(BaseModel):
    tokenizer: str
    estimated: bool
    tokens: int
    truncated: str | None = Field(default=None, description="the text cut to max_tokens (only with max_tokens)")
    truncated_tokens: int | None = Field(default=None, description="its tokens (only with max_tokens)")


class Health(BaseModel):
    status: str


class Ready(BaseModel):
    status: str
    preload: dict[str, str]
    counter: str | None = None  # what counts the default tokenizer's tokens (rs-bpe, quicktok...)


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` entries of an endpoint's error statuses."""
    what = {400: "malformed JSON", 401: "missing or wrong API key", 403: "a file outside the assets directory",
            408: "the body took too long to arrive", 413: "the body is too large",
            422: "invalid input (the message names the rule and the value)", 504: "the work took too long"}
    return {s: {"model": ErrorBody, "description": what.get(s, "error")} for s in statuses}
