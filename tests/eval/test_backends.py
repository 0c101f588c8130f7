"""The openai backend against a real HTTP server on 127.0.0.1 that answers from a script.

The script decides status codes (429, 500, 400, 200) so the retry logic is exercised over real
sockets; no claim about answer quality is made here.
"""

from __future__ import annotations

import json
import socket
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from edgewise.errors import ConfigError, InputError
from edgewise.eval.backends import BackendError, OpenAIBackend, backend_names, get_backend

from .fakes import UnloadedLlama


class Scripted:
    """A tiny OpenAI-compatible server: pops (status, headers, body) per request, records requests."""

    def __init__(self, script):
        self.script = list(script)
        self.requests = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                status, headers, payload = owner.script.pop(0) if owner.script else (500, {}, {"error": "script empty"})
                data = json.dumps(payload).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


OK_COMPLETION = (200, {}, {"choices": [{"text": " Paris\n"}], "usage": {"prompt_tokens": 12, "completion_tokens": 2}})
OK_CHAT = (200, {}, {"choices": [{"message": {"role": "assistant", "content": "Paris"}}], "usage": {"prompt_tokens": 9}})


@pytest.fixture
def server():
    made = []

    def make(*script):
        s = Scripted(script)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def test_completions_request_and_answer(server, monkeypatch):
    s = server(OK_COMPLETION)
    monkeypatch.setenv("EW_TEST_KEY", "sk-test")
    b = OpenAIBackend(s.url, "gemma", api_key_env="EW_TEST_KEY")
    out = b.complete("Question: capital of France?\nAnswer:", max_tokens=7, stop=["\n"])
    assert (out.text, out.prompt_tokens, out.completion_tokens, out.attempts) == (" Paris\n", 12, 2, 1)
    assert s.requests == [{"path": "/v1/completions", "auth": "Bearer sk-test", "body": {
        "model": "gemma", "temperature": 0.0, "max_tokens": 7, "stop": ["\n"],
        "prompt": "Question: capital of France?\nAnswer:"}}]


def test_chat_request_and_no_key_when_unset(server, monkeypatch):
    s = server(OK_CHAT)
    monkeypatch.delenv("EW_TEST_KEY", raising=False)
    out = OpenAIBackend(s.url, "m", api="chat", api_key_env="EW_TEST_KEY").complete("hi", max_tokens=3, stop=[])
    assert out.text == "Paris"
    assert s.requests == [{"path": "/v1/chat/completions", "auth": None, "body": {
        "model": "m", "temperature": 0.0, "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}}]


def test_retries_429_and_5xx_with_exponential_backoff(server):
    s = server((429, {}, {"error": "slow down"}), (503, {}, {"error": "busy"}), (500, {}, {}), OK_COMPLETION)
    waits = []
    b = OpenAIBackend(s.url, "m", retries=5, backoff=0.5, sleep=waits.append)
    out = b.complete("p", max_tokens=2, stop=["\n"])
    assert (out.text, out.attempts, len(s.requests)) == (" Paris\n", 4, 4)
    # 0.5 * 2**attempt, plus up to 10% jitter
    assert [round(w / base, 1) for w, base in zip(waits, [0.5, 1.0, 2.0])] in ([1.0, 1.0, 1.0], [1.1, 1.0, 1.0],
                                                                                [1.0, 1.1, 1.0], [1.0, 1.0, 1.1],
                                                                                [1.1, 1.1, 1.0], [1.1, 1.0, 1.1],
                                                                                [1.0, 1.1, 1.1], [1.1, 1.1, 1.1])
    assert len(waits) == 3


def test_retry_after_header_is_honoured_and_capped(server):
    s = server((429, {"Retry-After": "7"}, {}), (429, {"Retry-After": "999"}, {}), OK_COMPLETION)
    waits = []
    OpenAIBackend(s.url, "m", max_backoff=30, sleep=waits.append).complete("p", max_tokens=2, stop=[])
    assert waits == [7.0, 30]


def test_gives_up_after_retries_with_a_clear_message(server):
    s = server(*[(502, {}, {"error": "bad gateway"})] * 3)
    b = OpenAIBackend(s.url, "m", retries=2, backoff=0.01, sleep=lambda _: None)
    with pytest.raises(BackendError, match=r"/v1/completions failed after 3 attempts \(last: HTTP 502: .*bad gateway"):
        b.complete("p", max_tokens=2, stop=[])
    assert len(s.requests) == 3


def test_client_errors_are_not_retried(server):
    s = server((400, {}, {"error": "context length exceeded"}), OK_COMPLETION)
    with pytest.raises(BackendError, match="answered HTTP 400: .*context length exceeded"):
        OpenAIBackend(s.url, "m", sleep=lambda _: None).complete("p", max_tokens=2, stop=[])
    assert len(s.requests) == 1


def test_unreachable_endpoint_fails_after_retries():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    waits = []
    b = OpenAIBackend(f"http://127.0.0.1:{port}/v1", "m", retries=2, backoff=0.01, sleep=waits.append)
    with pytest.raises(BackendError) as err:
        b.complete("p", max_tokens=2, stop=[])
    assert str(err.value).startswith(f"http://127.0.0.1:{port}/v1/completions failed after 3 attempts (last: ")
    assert "check that the server is running and --base-url is right" in str(err.value)
    assert len(waits) == 2


def test_answer_without_choices_is_an_error(server):
    s = server((200, {}, {"object": "list"}))
    with pytest.raises(BackendError, match="answered without choices"):
        OpenAIBackend(s.url, "m").complete("p", max_tokens=2, stop=[])


def test_registry_and_bad_options():
    assert backend_names() == ["local", "openai"]
    with pytest.raises(ConfigError, match="unknown backend 'ollama'; choose one of: local, openai"):
        get_backend("ollama")
    with pytest.raises(ConfigError, match="api must be 'completions' or 'chat', but got 'embeddings'"):
        get_backend("openai", api="embeddings")
    with pytest.raises(InputError, match="base_url must start with http:// or https://, but got 'localhost:8080'"):
        get_backend("openai", base_url="localhost:8080")
    with pytest.raises(InputError, match="concurrency must be > 0, but got 0"):
        get_backend("openai", concurrency=0)


@pytest.mark.parametrize("info", [b"CPU : AVX2 = 1 | AMX_INT8 = 1 | ", b"CPU : AVX2 = 1 | AVX512 = 1 | "],
                         ids=["amx", "no-amx"])
def test_a_llama_cpp_built_with_amx_is_named_before_the_first_prompt(monkeypatch, tmp_path, info):
    llama_cpp = pytest.importorskip("llama_cpp")
    from edgewise.llm import local

    monkeypatch.setattr(llama_cpp, "llama_print_system_info", lambda: info)
    monkeypatch.setattr(llama_cpp, "Llama", UnloadedLlama)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        loaded = local._load_llama(tmp_path / "m.gguf", 512, 1, 0)
    assert loaded.options["model_path"] == str(tmp_path / "m.gguf")
    assert [str(w.message) for w in said] == ([local.AMX_NOTE] if b"AMX" in info else [])
