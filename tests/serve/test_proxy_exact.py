"""What a packed request keeps exactly: every number of a field the proxy does not change reaches the
upstream as the client wrote it, and what edgewise reads from the marked message keeps the body's
rules (a lone surrogate there is the same 400 as anywhere in the body, not a 500).

The upstream is the loopback fake of ``tests/proxy_upstream.py``, which records the raw bytes of
every request; edgewise is a real ``edgewise serve`` process. The forwarded body is read back with a
parser that keeps each number's text, and compared field by field with what was sent.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.serve.proxy.rawjson import RawNumber, dumps, number

from ..proxy_upstream import FakeOpenAI, start_proxy
from ..servers import stop

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

DOCS = ["Paris is the capital of France."]
QUESTION = "What is the capital of France?"
# numbers Python's json would write back otherwise: rounded, respelled, signless, infinite, unreadable
NUMBERS = {
    "nines": "1." + "9" * 5000,  # a float with more digits than a double: json makes it 2.0
    "long_int": "7" * 5000,  # more digits than int() reads (4300)
    "big_int": "18446744073709551617",  # past 64 bits
    "neg_zero": "-0.0",
    "neg_zero_int": "-0",
    "beyond": "1e400",  # beyond a double: json makes it inf
    "tiny": "-1E-400",
    "exponent": "1E5",
    "trailing_zero": "1.10",
    "plain": "0.5",
}


def literal_json(raw: bytes | str) -> object:
    """``raw`` parsed with every number kept as its text, so two bodies compare number for number."""
    keep = lambda s: ("number", s)  # noqa: E731
    return json.loads(raw, parse_int=keep, parse_float=keep)


def with_numbers(body: dict) -> str:
    """``body`` as JSON with the NUMBERS spliced in as written: at the top, nested in ``metadata``, and
    wherever ``body`` holds ``"@name@"`` (a message's field)."""
    marks = {name: f"@{name}@" for name in NUMBERS}
    text = json.dumps({**body, **marks, "metadata": {"nested": [marks["nines"], {"n": marks["trailing_zero"]}]}})
    for name, literal in NUMBERS.items():
        text = text.replace(f'"@{name}@"', literal)
    return text


@pytest.fixture(scope="module")
def upstream():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def proxy(upstream, tmp_path_factory):
    proc, base = start_proxy(tmp_path_factory.mktemp("proxy"), upstream.url, "--upstream-timeout", "60")
    yield base
    stop(proc)


def post(base: str, path: str, raw: str | bytes) -> httpx.Response:
    return httpx.post(base + path, content=raw.encode() if isinstance(raw, str) else raw,
                      headers={"content-type": "application/json"}, timeout=60)


# -- every number the proxy does not change reaches the upstream as it came ----------------------------

CHAT = {"model": "echo", "max_tokens": 16, "temperature": 0.7,
        "messages": [{"role": "system", "content": "Be terse.", "x_weight": "@exponent@"},  # 1E5 once spliced in
                     {"role": "user", "content": QUESTION}]}
FIELD = {"documents": DOCS, "context_window": 4096, "tokenizer": "cl100k_base"}


@pytest.mark.parametrize("convention", ["field", "message"])
def test_a_packed_chat_request_forwards_every_other_number_as_written(proxy, upstream, convention):
    if convention == "field":
        body = {**CHAT, "edgewise": FIELD}
    else:  # the marked message: removed, the rest as sent
        marked = {"role": "user", "name": "edgewise_documents", "content": json.dumps(FIELD)}
        body = {**CHAT, "messages": [CHAT["messages"][0], marked, CHAT["messages"][1]]}
    sent = with_numbers(body)
    r = post(proxy, "/v1/chat/completions", sent)
    assert r.status_code == 200, r.text
    assert int(r.headers["x-edgewise-dropped"]) == 0
    forwarded = literal_json(upstream.seen[-1][3])
    want = literal_json(sent)
    want.pop("edgewise", None)
    want["messages"] = [want["messages"][0], want["messages"][-1]]
    forwarded_last = forwarded["messages"][-1].pop("content")
    want["messages"][-1].pop("content")
    assert QUESTION in forwarded_last and DOCS[0] in forwarded_last  # the one field the proxy changes
    assert forwarded == want  # every other field, each number in the client's own spelling
    raw = upstream.seen[-1][3].decode()
    for name, literal in NUMBERS.items():
        assert f'"{name}": {literal}' in raw
    assert '"x_weight": 1E5' in raw


def test_a_packed_responses_request_forwards_every_other_number_as_written(proxy, upstream):
    body = {"model": "echo", "max_output_tokens": 16, "input": QUESTION, "top_p": 1.0, "edgewise": FIELD}
    sent = with_numbers(body)
    r = post(proxy, "/v1/responses", sent)
    assert r.status_code == 200, r.text
    forwarded = literal_json(upstream.seen[-1][3])
    want = literal_json(sent)
    del want["edgewise"]
    assert DOCS[0] in forwarded.pop("input") and want.pop("input") == QUESTION
    assert forwarded == want


def test_a_request_without_documents_is_forwarded_byte_for_byte(proxy, upstream):
    sent = with_numbers({**CHAT}).replace(", ", ",  ")  # its own spacing, too
    assert post(proxy, "/v1/chat/completions", sent).status_code == 200
    assert upstream.seen[-1][3] == sent.encode()


def test_a_number_the_proxy_reads_must_still_be_its_kind(proxy, upstream):
    n = len(upstream.seen)
    r = post(proxy, "/v1/chat/completions", json.dumps({**CHAT, "edgewise": FIELD}).replace('"max_tokens": 16',
                                                                                            '"max_tokens": 1E1'))
    assert (r.status_code, r.json()["error"]["message"]) == (422, "max_tokens must be an integer > 0, but got 1E1")
    assert len(upstream.seen) == n


# -- the writer, without a server -------------------------------------------------------------------------

json_numbers = st.one_of(
    st.integers().map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.from_regex(r"-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,30})?([eE][+-]?[0-9]{1,4})?", fullmatch=True),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(json_numbers, min_size=1, max_size=8))
def test_any_number_is_written_back_as_it_came(literals):
    text = "[" + ", ".join(literals) + "]"
    value = json.loads(text, parse_int=number, parse_float=number)
    assert dumps(value) == text
    for literal, item in zip(literals, value):  # a plain int or float exactly when it writes back the same
        assert isinstance(item, RawNumber) or json.dumps(item) == literal


# -- the marked message keeps the body's rules ---------------------------------------------------------

def marked(content: object) -> bytes:
    """A chat request whose marked message holds ``content`` as JSON (escapes as json writes them)."""
    return json.dumps({**CHAT, "messages": [{"role": "user", "name": "edgewise_documents", "content": json.dumps(content)},
                                            {"role": "user", "content": QUESTION}]}).encode()


@pytest.mark.parametrize(("content", "message"), [
    (["P\ud800"], "strings in the message named 'edgewise_documents' must be valid Unicode, but its content[0] holds "
                  "a lone surrogate (U+D800) at character 1"),
    ({"documents": DOCS, "context_window": 4096, "system": "Be \udfff terse."},
     "strings in the message named 'edgewise_documents' must be valid Unicode, but its content.system holds a lone "
     "surrogate (U+DFFF) at character 3"),
    ({"documents": [{"text": "Paris", "meta": {"\ud83d": 1}}], "context_window": 4096},
     "strings in the message named 'edgewise_documents' must be valid Unicode, but a key of its "
     "content.documents[0].meta holds a lone surrogate (U+D83D) at character 0"),
])
def test_a_lone_surrogate_in_the_marked_message_is_a_400_with_the_rule(proxy, upstream, content, message):
    n = len(upstream.seen)
    r = post(proxy, "/v1/chat/completions", marked(content))
    assert (r.status_code, r.json()) == (400, {"error": {"type": "edgewise_invalid_json", "message": message}})
    assert r.headers["x-edgewise-error"] == "1"
    assert len(upstream.seen) == n


@pytest.mark.parametrize(("number", "message"), [
    ("NaN", "numbers in the message named 'edgewise_documents' must be finite JSON numbers, but got NaN"),
    ("1e999", "numbers in the message named 'edgewise_documents' must be finite JSON numbers, but "
              "its content.documents[0].score is 1e999, beyond a double (±1.8e308)"),
    ("9" * 5000, "integers in the message named 'edgewise_documents' may have at most 4300 digits (Python's "
                 "int_max_str_digits), but its content.documents[0].score has 5000"),
])
def test_a_number_edgewise_cannot_read_in_the_marked_message_is_a_400(proxy, upstream, number, message):
    content = json.dumps({"documents": [{"text": "Paris", "score": 0.25}], "context_window": 4096}).replace("0.25", number)
    body = {**CHAT, "messages": [{"role": "user", "name": "edgewise_documents", "content": content},
                                 {"role": "user", "content": QUESTION}]}
    n = len(upstream.seen)
    r = post(proxy, "/v1/chat/completions", json.dumps(body).encode())
    assert (r.status_code, r.json()["error"]) == (400, {"type": "edgewise_invalid_json", "message": message})
    assert len(upstream.seen) == n


def test_a_marked_message_that_is_not_json_is_still_a_422(proxy):
    body = {**CHAT, "messages": [{"role": "user", "name": "edgewise_documents", "content": "[not json"},
                                 {"role": "user", "content": QUESTION}]}
    r = post(proxy, "/v1/chat/completions", json.dumps(body).encode())
    assert r.status_code == 422
    assert r.json()["error"]["message"].startswith("the content of the message named 'edgewise_documents' must be JSON")
