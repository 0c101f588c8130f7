"""The model registry: built-in OpenAI models, dated snapshots, a user's models file, pack(model=...)."""

import json
import sys
import types
from importlib.metadata import EntryPoint

import pytest

from edgewise import ConfigError, Packer, PackOptions, pack, registry
from edgewise.catalog import (
    MODELS,
    ModelSpec,
    get_model,
    load_models,
    model_names,
    model_source,
    register_model,
    resolve_name,
    unload_models,
)
from edgewise.cli import main
from edgewise.registry import Registry
from edgewise.tokens.tokenizers import get_tokenizer

CHUNKS = [{"id": "a", "text": "Paris is the capital of France.", "score": 0.9},
          {"id": "b", "text": "Lyon is a city in France, known for its food and its silk.", "score": 0.4},
          {"id": "c", "text": "Bananas are yellow.", "score": 0.1}]

# name: (tokenizer, context window, max output tokens), as OpenAI's model pages state them
OPENAI = {
    "gpt-5": ("o200k_base", 400_000, 128_000), "gpt-5-mini": ("o200k_base", 400_000, 128_000),
    "gpt-5-nano": ("o200k_base", 400_000, 128_000),
    "gpt-4.1": ("o200k_base", 1_047_576, 32_768), "gpt-4.1-mini": ("o200k_base", 1_047_576, 32_768),
    "gpt-4.1-nano": ("o200k_base", 1_047_576, 32_768), "gpt-4.5-preview": ("o200k_base", 128_000, 16_384),
    "gpt-4o": ("o200k_base", 128_000, 16_384), "gpt-4o-2024-05-13": ("o200k_base", 128_000, 4_096),
    "gpt-4o-mini": ("o200k_base", 128_000, 16_384), "chatgpt-4o-latest": ("o200k_base", 128_000, 16_384),
    "o1": ("o200k_base", 200_000, 100_000), "o1-pro": ("o200k_base", 200_000, 100_000),
    "o1-mini": ("o200k_base", 128_000, 65_536), "o1-preview": ("o200k_base", 128_000, 32_768),
    "o3": ("o200k_base", 200_000, 100_000), "o3-pro": ("o200k_base", 200_000, 100_000),
    "o3-mini": ("o200k_base", 200_000, 100_000), "o4-mini": ("o200k_base", 200_000, 100_000),
    "gpt-4-turbo": ("cl100k_base", 128_000, 4_096), "gpt-4-turbo-preview": ("cl100k_base", 128_000, 4_096),
    "gpt-4-0125-preview": ("cl100k_base", 128_000, 4_096), "gpt-4-1106-preview": ("cl100k_base", 128_000, 4_096),
    "gpt-4": ("cl100k_base", 8_192, 8_192), "gpt-3.5-turbo": ("cl100k_base", 16_385, 4_096),
    "gpt-3.5-turbo-16k": ("cl100k_base", 16_385, 4_096), "gpt-3.5-turbo-0613": ("cl100k_base", 4_096, 4_096),
    "gpt-3.5-turbo-0301": ("cl100k_base", 4_096, 4_096), "gpt-3.5-turbo-instruct": ("cl100k_base", 4_096, 4_096),
}
# the models edgewise runs itself (--backend local), as their model cards state them
LOCAL = {"gemma-3-270m": ("gemma3", 32_768, 8_192), "qwen2.5-coder-1.5b-instruct": ("qwen2.5-coder", 32_768, 8_192)}
EXPECTED = {**OPENAI, **LOCAL}


@pytest.fixture
def files(tmp_path):
    """Write models files; every file a test loads is unloaded afterwards (built-ins restored)."""
    written = []

    def write(name: str, text: str):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
        return path

    yield write
    for path in written:
        unload_models(path)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- the built-ins ---------------------------------------------------------------------------------

def test_the_builtins_are_exactly_the_documented_table():
    assert {n: (s.tokenizer, s.context_window, s.max_output_tokens) for n in model_names()
            for s in [get_model(n)]} == EXPECTED
    assert model_names() == list(EXPECTED)
    assert {model_source(n) for n in model_names()} == {"edgewise"}


def test_each_builtin_counts_with_the_encoding_tiktoken_names_for_it():
    """tiktoken's own model table is the independent reference for the tokenizer of each model."""
    tiktoken_model = pytest.importorskip("tiktoken.model")
    assert {n: get_model(n).tokenizer for n in OPENAI} == {
        n: tiktoken_model.encoding_name_for_model(n) for n in OPENAI}


def test_every_builtin_tokenizer_loads():
    assert {get_tokenizer(get_model(n).tokenizer).name for n in OPENAI} == {"o200k_base", "cl100k_base"}


@pytest.mark.parametrize("name, family", [
    ("gpt-4o-2024-08-06", "gpt-4o"),
    ("gpt-4o-2024-11-20", "gpt-4o"),
    ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),  # the longer family, never gpt-4o
    ("gpt-4.1-2025-04-14", "gpt-4.1"),
    ("gpt-4.1-nano-2025-04-14", "gpt-4.1-nano"),
    ("o3-2025-04-16", "o3"),
    ("o1-2024-12-17", "o1"),
    ("gpt-4-turbo-2024-04-09", "gpt-4-turbo"),
    ("gpt-4-0613", "gpt-4"),
    ("gpt-3.5-turbo-0125", "gpt-3.5-turbo"),
    ("gpt-4o-2024-05-13", "gpt-4o-2024-05-13"),  # registered itself: its output cap differs
    ("gpt-3.5-turbo-0613", "gpt-3.5-turbo-0613"),  # registered itself: a 4K window
    ("ft:gpt-4o-mini-2024-07-18:acme::B2x9", "gpt-4o-mini"),
    ("ft:gpt-3.5-turbo:acme::B2x9", "gpt-3.5-turbo"),
])
def test_dated_snapshots_and_fine_tunes_resolve_to_their_family(name, family):
    assert (resolve_name(name), get_model(name)) == (family, get_model(family))


@pytest.mark.parametrize("name", [
    "gpt-4o-latest", "gpt-4o-2024", "gpt-4o-2024-08", "gpt-4o-2024-08-06-extra", "gpt-4o-mini-search-preview",
    "gpt-4o:2024-08-06", "ft:", "ft:gpt-9:x", "GPT-4o", " gpt-4o", "gpt-4o-12345", "",
])
def test_nothing_else_is_guessed(name):
    assert resolve_name(name) is None
    with pytest.raises(ConfigError) as err:
        get_model(name)
    assert str(err.value).startswith(f"unknown model {name!r}")


def test_an_unknown_model_names_the_closest_and_every_known_one():
    with pytest.raises(ConfigError) as err:
        get_model("gpt-4x")
    assert str(err.value) == ("unknown model 'gpt-4x' (did you mean 'gpt-4' or 'gpt-4o' or 'gpt-4.1'?); "
                              f"choose one of: {', '.join(EXPECTED)}")
    with pytest.raises(ConfigError) as err:
        get_model("llama")
    assert str(err.value) == f"unknown model 'llama'; choose one of: {', '.join(EXPECTED)}"
    with pytest.raises(ConfigError) as err:
        get_model(4)
    assert str(err.value) == "a model must be given by name, but got int"


@pytest.mark.parametrize("args, message", [
    (("", "o200k_base", 10), "model '': name must be a non-empty string without ':' or edge spaces, but got ''"),
    (("a:b", "o200k_base", 10), "model 'a:b': name must be a non-empty string without ':' or edge spaces, but got 'a:b'"),
    (("m", "", 10), "model 'm': tokenizer must be a tokenizer spec (a non-empty string), but got ''"),
    (("m", None, 10), "model 'm': tokenizer must be a tokenizer spec (a non-empty string), but got None"),
    (("m", "words", 0), "model 'm': context_window must be an integer > 0, but got 0"),
    (("m", "words", True), "model 'm': context_window must be an integer > 0, but got True"),
    (("m", "words", 8.5), "model 'm': context_window must be an integer > 0, but got 8.5"),
    (("m", "words", 10, 0), "model 'm': max_output_tokens must be an integer > 0, but got 0"),
    (("m", "words", 10, 11), "model 'm': max_output_tokens must be <= context_window (10), but got 11"),
])
def test_a_model_spec_checks_its_fields(args, message):
    with pytest.raises(ConfigError) as err:
        ModelSpec(*args)
    assert str(err.value) == message


def test_register_model_refuses_a_taken_name():
    spec = register_model(ModelSpec("my-llama", "words", 4096))
    try:
        assert (get_model("my-llama"), model_source("my-llama"), model_names()[-1]) == (spec, "python", "my-llama")
        with pytest.raises(ConfigError) as err:
            register_model(ModelSpec("gpt-4o", "words", 10))
        assert str(err.value).startswith("model 'gpt-4o' is already registered by edgewise")
    finally:
        MODELS.unregister("my-llama")


def test_a_plugin_model_comes_from_an_entry_point(monkeypatch):
    module = types.ModuleType("acme_models")
    module.SPEC = ModelSpec("acme-7b-internal", "words", 4096, 512)
    module.TABLE = {"tokenizer": "o200k_base", "context_window": 32_000}
    module.BAD = {"tokenizer": "words", "context_window": 10, "window": 5}
    monkeypatch.setitem(sys.modules, "acme_models", module)
    points = [EntryPoint(name, f"acme_models:{attr}", "edgewise.models")
              for name, attr in (("acme-7b", "SPEC"), ("acme-table", "TABLE"), ("acme-bad", "BAD"))]
    monkeypatch.setattr(registry, "_entry_points", lambda group: [p for p in points if p.group == group])
    fresh = Registry("models")
    fresh.register("gpt-4o", get_model("gpt-4o"), source="edgewise")
    monkeypatch.setattr("edgewise.catalog.MODELS", fresh)
    assert get_model("acme-7b") == ModelSpec("acme-7b", "words", 4096, 512)
    assert get_model("acme-table") == ModelSpec("acme-table", "o200k_base", 32_000)
    assert model_names() == ["gpt-4o", "acme-7b", "acme-table", "acme-bad"]
    with pytest.raises(ConfigError) as err:
        get_model("acme-bad")
    assert str(err.value) == ("model 'acme-bad' (from acme_models): unknown field 'window'; "
                              "the fields are: context_window, max_output_tokens, tokenizer")


# -- a user's models file ---------------------------------------------------------------------------

TOML = """
["llama-3.1-8b"]
tokenizer = "words"
context_window = 131072
max_output_tokens = 2048

[tiny]
tokenizer = "chars"
context_window = 60
"""


def test_a_toml_file_adds_models_and_unloading_removes_them(files):
    path = files("models.toml", TOML)
    added = load_models(path)
    assert added == [ModelSpec("llama-3.1-8b", "words", 131072, 2048), ModelSpec("tiny", "chars", 60)]
    assert (get_model("tiny"), model_source("tiny")) == (ModelSpec("tiny", "chars", 60), str(path))
    assert model_names() == [*EXPECTED, "llama-3.1-8b", "tiny"]
    assert get_model("llama-3.1-8b-2025-01-01") == added[0]  # the snapshot rule holds for a user's models too
    assert unload_models(path) == ["llama-3.1-8b", "tiny"]
    assert model_names() == list(EXPECTED)


def test_a_json_file_adds_models_and_loading_it_again_replaces_them(files):
    path = files("models.json", json.dumps({"local-gemma": {"tokenizer": "words", "context_window": 32768}}))
    assert load_models(path) == [ModelSpec("local-gemma", "words", 32768)]
    path.write_text(json.dumps({"local-gemma": {"tokenizer": "words", "context_window": 8192},
                                "other": {"tokenizer": "chars", "context_window": 100}}))
    assert load_models(path) == [ModelSpec("local-gemma", "words", 8192), ModelSpec("other", "chars", 100)]
    assert (get_model("local-gemma").context_window, model_names()[-2:]) == (8192, ["local-gemma", "other"])
    path.write_text(json.dumps({"other": {"tokenizer": "chars", "context_window": 100}}))
    load_models(path)  # an entry the file no longer has is gone
    assert model_names()[-1:] == ["other"] and resolve_name("local-gemma") is None


def test_an_override_replaces_a_builtin_until_the_file_is_unloaded(files):
    path = files("gateway.toml", '[gpt-4o]\ntokenizer = "o200k_base"\ncontext_window = 32000\noverride = true\n')
    builtin = get_model("gpt-4o")
    assert load_models(path) == [ModelSpec("gpt-4o", "o200k_base", 32000)]
    assert (get_model("gpt-4o-2024-08-06"), model_source("gpt-4o")) == (ModelSpec("gpt-4o", "o200k_base", 32000), str(path))
    assert pack("capital?", CHUNKS, model="gpt-4o").debug_info.budget == 32000
    unload_models(path)
    assert (get_model("gpt-4o"), model_source("gpt-4o")) == (builtin, "edgewise")
    assert model_names() == list(EXPECTED)


def test_a_file_that_fails_adds_nothing(files):
    path = files("half.toml", '[good]\ntokenizer = "words"\ncontext_window = 10\n\n[bad]\ntokenizer = "words"\n')
    with pytest.raises(ConfigError):
        load_models(path)
    assert resolve_name("good") is None


def _errors():
    entry = '[m]\ntokenizer = "words"\ncontext_window = 100\n'
    return [
        ("m.yaml", "x: 1", "a models file must end in .toml or .json, but got '{path}'"),
        ("m.toml", "[m\n", "{path}: invalid TOML: Expected ']' at the end of a table declaration (at line 1, column 3)"),
        ("m.json", '{"m": {', "{path}: invalid JSON at line 1 column 8: Expecting property name enclosed in double quotes"),
        ("m.json", "[]", "{path}: a models file must map model names to tables, but its top level is a list"),
        ("m.json", "{}", "{path}: a models file must define at least one model, but it is empty"),
        ("m.toml", "m = 5\n", "{path}: model 'm' must be a table of tokenizer, context_window, max_output_tokens, "
                              "override, but got 5"),
        ("m.toml", entry + "window = 5\n",
         "{path}: model 'm': unknown field 'window'; the fields are: tokenizer, context_window, max_output_tokens, override"),
        ("m.toml", "[m]\ncontext_window = 100\n", "{path}: model 'm': field 'tokenizer' is required, but it is missing"),
        ("m.toml", '[m]\ntokenizer = "words"\n', "{path}: model 'm': field 'context_window' is required, but it is missing"),
        ("m.toml", '[m]\ntokenizer = "words"\ncontext_window = 0\n',
         "{path}: model 'm': context_window must be an integer > 0, but got 0"),
        ("m.toml", '[m]\ntokenizer = "words"\ncontext_window = "8k"\n',
         "{path}: model 'm': context_window must be an integer > 0, but got '8k'"),
        ("m.json", '{"m": {"tokenizer": "words", "context_window": true}}',
         "{path}: model 'm': context_window must be an integer > 0, but got True"),
        ("m.json", '{"m": {"tokenizer": "words", "context_window": 8192.0}}',
         "{path}: model 'm': context_window must be an integer > 0, but got 8192.0"),
        ("m.toml", entry + "max_output_tokens = 101\n",
         "{path}: model 'm': max_output_tokens must be <= context_window (100), but got 101"),
        ("m.toml", entry + "max_output_tokens = -1\n",
         "{path}: model 'm': max_output_tokens must be an integer > 0, but got -1"),
        ("m.toml", '[m]\ntokenizer = 5\ncontext_window = 100\n',
         "{path}: model 'm': tokenizer must be a tokenizer spec (a non-empty string), but got 5"),
        ("m.toml", '[m]\ntokenizer = "gpt9"\ncontext_window = 100\n',
         "{path}: model 'm': tokenizer 'gpt9' is not usable: unknown tokenizer 'gpt9'; choose one of: "
         "cl100k_base, o200k_base, words, chars, hf:PATH, gguf:PATH, gemma3, qwen2.5-coder"),
        ("m.toml", '[m]\ntokenizer = "gguf"\ncontext_window = 100\n',
         "{path}: model 'm': tokenizer 'gguf' is not usable: tokenizer 'gguf' needs an argument: gguf:PATH"),
        ("m.toml", '[m]\ntokenizer = "words:x"\ncontext_window = 100\n',
         "{path}: model 'm': tokenizer 'words:x' is not usable: tokenizer 'words' takes no argument, but got 'words:x'"),
        ("m.json", '{"a:b": {"tokenizer": "words", "context_window": 10}}',
         "{path}: a model name must be a non-empty string without ':' or edge spaces, but got 'a:b'"),
        ("m.json", '{" m": {"tokenizer": "words", "context_window": 10}}',
         "{path}: a model name must be a non-empty string without ':' or edge spaces, but got ' m'"),
        ("m.toml", entry + "override = 1\n", "{path}: model 'm': override must be true or false, but got 1"),
        ("m.toml", entry + "override = true\n",
         "{path}: model 'm': override must be set only to replace a known model, but 'm' is not one"),
        ("m.toml", '[gpt-4o]\ntokenizer = "o200k_base"\ncontext_window = 100\n',
         "{path}: model 'gpt-4o' is already defined by edgewise; add override = true to its entry to replace it"),
        ("m.json", b'{"m": "\xff"}', "{path}: a models file must be UTF-8, but byte 7 is not"),
    ]


@pytest.mark.parametrize("name, text, message", _errors())
def test_every_error_names_the_file_the_model_the_rule_and_the_value(files, tmp_path, name, text, message):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError) as err:
        load_models(path)
    assert str(err.value) == message.format(path=path)
    assert model_names() == list(EXPECTED)


def test_a_missing_file_and_a_name_two_files_define(files, tmp_path):
    with pytest.raises(ConfigError) as err:
        load_models(tmp_path / "nope.toml")
    assert str(err.value) == f"models file {str(tmp_path / 'nope.toml')!r} could not be read: No such file or directory"
    first = files("a.toml", '[shared]\ntokenizer = "words"\ncontext_window = 10\n')
    second = files("b.toml", '[shared]\ntokenizer = "chars"\ncontext_window = 20\n')
    load_models(first)
    with pytest.raises(ConfigError) as err:
        load_models(second)
    assert str(err.value) == (f"{second}: model 'shared' is already defined by {first}; "
                              "add override = true to its entry to replace it")
    second.write_text('[shared]\ntokenizer = "chars"\ncontext_window = 20\noverride = true\n')
    load_models(second)
    assert get_model("shared") == ModelSpec("shared", "chars", 20)
    unload_models(second)  # the first file's entry comes back
    assert (get_model("shared"), model_source("shared")) == (ModelSpec("shared", "words", 10), str(first))


# -- pack(model=...) ---------------------------------------------------------------------------------

def test_the_model_picks_the_tokenizer_and_its_window_is_the_budget():
    info = pack("capital?", CHUNKS, model="gpt-4o").debug_info
    assert (info.tokenizer, info.budget) == ("o200k_base", 128_000)
    assert pack("capital?", CHUNKS, model="gpt-4o").prompt == pack("capital?", CHUNKS, tokenizer="o200k_base",
                                                                    budget=128_000).prompt
    info = pack("capital?", CHUNKS, model="gpt-3.5-turbo-0125", budget=300).debug_info
    assert (info.tokenizer, info.budget) == ("cl100k_base", 300)  # a given budget wins
    assert pack("capital?", CHUNKS).debug_info.tokenizer == "cl100k_base"  # no model: the default, as before


def test_a_small_window_packs_exactly_like_that_budget(files):
    load_models(files("tiny.toml", '[tiny]\ntokenizer = "words"\ncontext_window = 60\n'))
    by_model = pack("capital?", CHUNKS, model="tiny", layout="paper")
    by_hand = pack("capital?", CHUNKS, tokenizer="words", budget=60, layout="paper")
    assert by_model.debug_info.to_dict() == by_hand.debug_info.to_dict()
    assert [c["id"] for c in by_model.debug_info.chunks if c["outcome"] == "dropped"] != []  # the window bites


def test_a_tokenizer_that_is_not_the_models_is_an_error_naming_both():
    with pytest.raises(ConfigError) as err:
        pack("q", CHUNKS, model="gpt-4o", tokenizer="cl100k_base")
    assert str(err.value) == ("tokenizer 'cl100k_base' is not the tokenizer of model 'gpt-4o', which counts with "
                              "'o200k_base'; give the model alone, or the model's tokenizer")
    assert pack("q", CHUNKS, model="gpt-4o", tokenizer="o200k_base").debug_info.tokenizer == "o200k_base"
    same = get_tokenizer("o200k_base")
    assert pack("q", CHUNKS, model="gpt-4o", tokenizer=same).debug_info.tokenizer == "o200k_base"


def test_a_packer_resolves_the_model_when_built_and_takes_a_spec_object():
    with pytest.raises(ConfigError) as err:
        Packer(model="gpt-4x")
    assert str(err.value).startswith("unknown model 'gpt-4x'")
    own = ModelSpec("house-model", "words", 50)
    packer = Packer(model=own, layout="paper")
    assert packer.pack("q", CHUNKS).debug_info.budget == 50
    assert packer.options.to_dict(changed_only=True) == {"model": "house-model", "layout": "paper"}


def test_the_option_reaches_the_schema_and_the_conditions():
    schema = PackOptions.json_schema()["properties"]
    assert schema["model"] == {"anyOf": [{"type": "string", "minLength": 1}, {"type": "null"}], "default": None,
                               "description": PackOptions.spec("model").help}
    assert schema["tokenizer"]["default"] is None
    assert PackOptions.from_strings({"model": "gpt-4o"}).model == "gpt-4o"
    assert PackOptions.from_dict({"model": "gpt-4o"}).to_dict(changed_only=True) == {"model": "gpt-4o"}


# -- the command line ----------------------------------------------------------------------------------

@pytest.fixture
def chunks_file(tmp_path):
    path = tmp_path / "chunks.json"
    path.write_text(json.dumps(CHUNKS))
    return str(path)


def test_cli_model_flag(capsys, chunks_file):
    code, out, _ = run(capsys, "pack", "-q", "capital?", "-c", chunks_file, "--model", "gpt-4o", "-f", "json")
    assert code == 0
    assert json.loads(out) == json.loads(json.dumps(pack("capital?", CHUNKS, model="gpt-4o").to_dict()))
    assert (json.loads(out)["debug_info"]["tokenizer"], json.loads(out)["debug_info"]["budget"]) == ("o200k_base", 128000)


@pytest.mark.parametrize("args, message", [
    (["--model", "gpt-4x"], "edgewise: error: unknown model 'gpt-4x' (did you mean 'gpt-4' or 'gpt-4o' or 'gpt-4.1'?); "
                            f"choose one of: {', '.join(EXPECTED)}"),
    (["--model", "gpt-4o", "-t", "cl100k_base"],
     "edgewise: error: tokenizer 'cl100k_base' is not the tokenizer of model 'gpt-4o', which counts with "
     "'o200k_base'; give the model alone, or the model's tokenizer"),
])
def test_cli_model_errors_are_one_line(capsys, chunks_file, args, message):
    code, out, err = run(capsys, "pack", "-q", "q", "-c", chunks_file, *args)
    assert (code, out, err.strip()) == (2, "", message)


def test_edgewise_list_shows_the_models(capsys):
    code, out, _ = run(capsys, "list")
    assert code == 0
    assert [line for line in out.splitlines() if line.startswith("models: ")] == ["models: " + ", ".join(EXPECTED)]
