"""The registry behind orders, layouts, scorers, tokenizers, backends, tasks and metrics."""

from __future__ import annotations

import threading
import warnings
from importlib.metadata import EntryPoint

import pytest

import edgewise
from edgewise import ConfigError, errors, registry
from edgewise.eval import backends
from edgewise.layout import LAYOUTS, Rendered
from edgewise.order import ORDERS
from edgewise.registry import PluginWarning, Registry
from edgewise.score import SCORERS
from edgewise.tokens.tokenizers import TOKENIZERS


def square(n):
    return n * n


def cube(n):
    return n * n * n


HERE = square.__module__.split(".")[0]  # the source of what this module registers (its top-level name)


def test_register_get_names_source_and_iteration():
    reg = Registry("shapes", entry_points=False)
    assert reg.register("square", square) is square
    assert reg.register("cube")(cube) is cube  # as a decorator
    assert reg.register("square", square) is square  # the same object again is not a duplicate
    assert (reg.get("square"), reg["cube"]) == (square, cube)
    assert (reg.names(), list(reg), len(reg), "cube" in reg, "circle" in reg) == (["square", "cube"], ["square", "cube"], 2, True, False)
    assert (reg.source("square"), reg.noun, reg.group) == (HERE, "shape", None)
    reg.register("circle", len, source="geometry-plugin", arg="R")
    assert reg.describe() == [("square", HERE), ("cube", HERE), ("circle:R", "geometry-plugin")]


def test_a_duplicate_name_names_the_entry_it_would_replace():
    reg = Registry("shapes", entry_points=False)
    reg.register("square", square)
    with pytest.raises(ConfigError) as err:
        reg.register("square", cube)
    assert str(err.value) == f"shape 'square' is already registered by {HERE} ({square.__module__}.square); choose another name"
    with pytest.raises(ConfigError) as err:
        edgewise.register_order("edges", cube)
    assert str(err.value) == "order 'edges' is already registered by edgewise (edgewise.order.edges); choose another name"
    assert ORDERS.get("edges") is edgewise.order.edges


def test_unknown_names_and_bad_names():
    reg = Registry("shapes", entry_points=False)
    reg.register("square", square, arg="SIDE")
    reg.register("cube", cube)
    for call in (lambda: reg.get("circle"), lambda: reg.source("circle"), lambda: reg.lookup("circle:2")):
        with pytest.raises(ConfigError) as err:
            call()
        assert str(err.value).startswith("unknown shape 'circle")
    assert str(err.value) == "unknown shape 'circle:2'; choose one of: square:SIDE, cube"
    for bad in ("", "a:b", " x", 3):
        with pytest.raises(ConfigError, match="a shape name must be a non-empty string without ':' or edge spaces"):
            reg.register(bad, square)


def test_lookup_splits_the_argument_and_strict_lookup_checks_it():
    reg = Registry("shapes", entry_points=False)
    reg.register("square", square, arg="SIDE")
    reg.register("cube", cube)
    assert reg.lookup("square:C:/x") == (square, "C:/x")
    assert reg.lookup("cube") == (cube, None)
    assert reg.lookup("cube:") == (cube, None)
    with pytest.raises(ConfigError) as err:
        reg.lookup("square", strict=True)
    assert str(err.value) == "shape 'square' needs an argument: square:SIDE"
    with pytest.raises(ConfigError) as err:
        reg.lookup("cube:3", strict=True)
    assert str(err.value) == "shape 'cube' takes no argument, but got 'cube:3'"
    # the same rule for the real registries
    with pytest.raises(ConfigError) as err:
        edgewise.get_tokenizer("hf:")
    assert str(err.value) == "tokenizer 'hf' needs an argument: hf:PATH"
    with pytest.raises(ConfigError) as err:
        edgewise.get_tokenizer("words:fast")
    assert str(err.value) == "tokenizer 'words' takes no argument, but got 'words:fast'"


def test_a_reserved_name_is_filled_by_its_module_on_first_use():
    reg = Registry("shapes", entry_points=False)
    reg.reserve("json", "json")
    assert reg.describe() == [("json", "edgewise")]
    with pytest.raises(ConfigError) as err:
        reg.get("json")  # importing json registers nothing
    assert str(err.value) == "shape 'json': module json did not register it"
    with pytest.raises(ConfigError) as err:
        reg.register("json", square)  # not from the reserved module: a duplicate
    assert str(err.value) == "shape 'json' is already registered by edgewise (json); choose another name"
    # the built-in model scorers are reserved so `import edgewise` stays light; their modules fill them
    from edgewise.score import hybrid

    assert SCORERS.get("hybrid") is hybrid._make_hybrid


def _entry(name: str, value: str, group: str = "edgewise.shapes") -> EntryPoint:
    return EntryPoint(name=name, value=value, group=group)


@pytest.fixture
def entry_points(monkeypatch):
    """Replace the installed entry points with a list the test sets; counts the scans."""
    state = {"points": [], "scans": 0}

    def fake(group):
        state["scans"] += 1
        return [ep for ep in state["points"] if ep.group == group]

    monkeypatch.setattr(registry, "_entry_points", fake)
    return state


def test_entry_points_load_once_on_first_use_and_broken_ones_warn(entry_points):
    entry_points["points"] = [
        _entry("sqrt", "math:sqrt"),
        _entry("dumps", "json:dumps"),
        _entry("lost", "no_such_module_anywhere:thing"),
        _entry("square", "math:floor"),  # takes a name already registered
        _entry("other", "json:loads", group="edgewise.elsewhere"),
    ]
    reg = Registry("shapes")
    reg.register("square", square)
    assert (entry_points["scans"], reg.group) == (0, "edgewise.shapes")  # registering does not load plugins
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert reg.names() == ["square", "sqrt", "dumps"]
        assert reg.names() == ["square", "sqrt", "dumps"]
    import json

    # without distribution metadata (these fake entry points), the source is the module's package
    assert (reg.get("dumps"), reg.source("dumps"), reg.source("sqrt"), entry_points["scans"]) == (json.dumps, "json", "math", 1)
    assert [(w.category, str(w.message)) for w in caught] == [
        (PluginWarning, "shape plugin 'lost' from no_such_module_anywhere (no_such_module_anywhere:thing) was not loaded: "
                        "ModuleNotFoundError: No module named 'no_such_module_anywhere'"),
        (PluginWarning, "shape plugin 'square' from math (math:floor) was not loaded: shape 'square' is "
                        f"already registered by {HERE} ({square.__module__}.square); choose another name"),
    ]


def test_a_plugin_that_registers_itself_keeps_one_entry_with_its_distribution(entry_points):
    import math

    reg = Registry("shapes")
    reg.register("sqrt", math.sqrt, source="by-hand")  # as if the plugin module had used the decorator on import
    entry_points["points"] = [_entry("sqrt", "math:sqrt")]
    assert (reg.names(), reg.get("sqrt"), reg.source("sqrt")) == (["sqrt"], math.sqrt, "math")


def test_plugins_load_once_when_many_threads_ask_first(entry_points):
    loads = []
    started = threading.Barrier(16)

    class Counted(EntryPoint):
        def load(self):
            loads.append(self.name)
            return square

    entry_points["points"] = [Counted(name=f"p{i}", value="math:sqrt", group="edgewise.shapes") for i in range(50)]
    reg = Registry("shapes")
    seen, errors_ = [], []

    def ask():
        started.wait()
        try:
            seen.append(reg.names())
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors_.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    names = [f"p{i}" for i in range(50)]
    assert (errors_, loads, seen) == ([], names, [names] * 16)


def test_public_decorators_register_parts_that_pack_uses():
    @edgewise.register_order("test-best-last")
    def best_last(n, ctx):
        return list(range(1, n)) + [0]

    @edgewise.register_scorer("test-length")
    class Length:
        name = "test-length"

        def __init__(self, arg):
            pass

        def score(self, query, texts):
            return [float(len(t)) for t in texts]

    @edgewise.register_layout("test-lines")
    class Lines:
        name = "test-lines"

        def __init__(self, arg):
            pass

        def block(self, item):
            return item.id + "\n"

        def render(self, inp):
            ids = [i.id for i in inp.items]
            return Rendered("", "".join(self.block(i) for i in inp.items) + inp.query, {"docs": ids}, ids, 0)

    @edgewise.register_tokenizer("test-chars")
    class Chars:
        name, estimated = "test-chars", False

        def __init__(self, arg):
            pass

        def count(self, text):
            return len(text)

        def truncate(self, text, max_tokens):
            return text[:max_tokens]

        def count_prefix(self, text, n_chars):
            return min(n_chars, len(text))

        def count_parts(self, parts):
            return sum(map(len, parts))

    try:
        p = edgewise.pack("q?", ["bb", "a", "ccc"], order="test-best-last", scorer="test-length",
                          layout="test-lines", tokenizer="test-chars")
        assert (p.prompt, p.debug_info.prompt_tokens) == ("chunk-0\nchunk-1\nchunk-2\nq?", 26)
        assert [d.source(n) for d, n in ((ORDERS, "test-best-last"), (SCORERS, "test-length"),
                                          (LAYOUTS, "test-lines"), (TOKENIZERS, "test-chars"))] == [HERE] * 4
    finally:
        ORDERS.unregister("test-best-last")
        SCORERS.unregister("test-length")
        LAYOUTS.unregister("test-lines")
        TOKENIZERS.unregister("test-chars")


def test_a_tokenizer_factory_must_give_a_tokenizer():
    edgewise.register_tokenizer("test-not-a-tokenizer", lambda arg: "oops")
    try:
        with pytest.raises(ConfigError) as err:
            edgewise.get_tokenizer("test-not-a-tokenizer")
        assert str(err.value) == ("tokenizer 'test-not-a-tokenizer' gave a str, which is not a Tokenizer "
                                  "(it needs name, estimated, count, truncate, count_prefix and count_parts)")
    finally:
        TOKENIZERS.unregister("test-not-a-tokenizer")


def test_the_public_surface():
    import types

    assert isinstance(edgewise.order, types.ModuleType) and isinstance(edgewise.layout, types.ModuleType)
    assert edgewise.__all__ == [
        "pack", "variants", "Packer", "PackOptions", "Chunk", "Packed", "DebugInfo", "reorder", "get_tokenizer",
        "register_order", "register_layout", "register_scorer", "register_tokenizer",
        "EdgewiseError", "InputError", "ConfigError", "BudgetError", "BackendError",
    ]
    assert all(hasattr(edgewise, name) for name in edgewise.__all__)
    assert edgewise.BackendError is errors.BackendError is backends.BackendError
    assert issubclass(errors.BackendError, errors.EdgewiseError)
    with pytest.raises(ConfigError) as err:
        edgewise.get_scorer("given")
    assert str(err.value) == (
        "scorer 'given' is not a model: it keeps the scores the chunks carry (pass it to pack(), not get_scorer())")


def test_describe_lists_every_registry_with_sources():
    listed = registry.describe()
    assert list(listed) == ["orders", "layouts", "scorers", "tokenizers", "models", "backends", "tasks", "metrics"]
    assert listed["orders"] == [(n, "edgewise") for n in edgewise.order_names()]
    assert listed["tokenizers"] == [(n, "edgewise") for n in ("cl100k_base", "o200k_base", "words", "chars", "hf:PATH", "gguf:PATH",
                                                              "gemma3", "qwen2.5-coder")]
    assert listed["layouts"] == [(n, "edgewise") for n in ("sections", "layered", "paper", "kv", "template:FILE")]
    assert registry.describe(("metrics",)) == {"metrics": [("best_subspan_em", "edgewise"), ("kv_exact", "edgewise")]}
    with pytest.raises(ConfigError) as err:
        registry.describe(("widgets",))
    assert str(err.value) == "unknown registry 'widgets'; choose one of: orders, layouts, scorers, tokenizers, models, backends, tasks, metrics"


def test_a_registered_name_is_found_without_loading_plugins(entry_points):
    """Built-in names never wait for the plugin scan; a name not registered yet loads the plugins, once,
    and a plugin that takes a registered name is reported then."""
    import math

    entry_points["points"] = [_entry("sqrt", "math:sqrt"), _entry("square", "math:floor")]
    reg = Registry("shapes")
    reg.register("square", square, arg="SIDE")
    found = (reg.get("square"), reg["square"], reg.lookup("square:2", strict=True), "square" in reg, 3 in reg)
    assert (found, entry_points["scans"]) == ((square, square, (square, "2"), True, False), 0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert ("circle" in reg, reg.get("sqrt"), "sqrt" in reg, entry_points["scans"]) == (False, math.sqrt, True, 1)
        with pytest.raises(ConfigError) as err:
            reg.get("circle")
    assert (str(err.value), entry_points["scans"]) == ("unknown shape 'circle'; choose one of: square:SIDE, sqrt", 1)
    assert [(w.category, str(w.message)) for w in caught] == [
        (PluginWarning, "shape plugin 'square' from math (math:floor) was not loaded: shape 'square' is "
                        f"already registered by {HERE} ({square.__module__}.square); choose another name"),
    ]


@pytest.mark.parametrize("listing", ["names", "entries", "describe", "display_names", "len", "iter", "source", "unregister"])
def test_every_listing_loads_the_plugins(entry_points, listing):
    import math

    entry_points["points"] = [_entry("sqrt", "math:sqrt")]
    reg = Registry("shapes")
    reg.register("square", square)
    calls = {"names": reg.names, "entries": lambda: [e.name for e in reg.entries()], "describe": reg.describe,
             "display_names": reg.display_names, "len": lambda: len(reg), "iter": lambda: list(reg),
             "source": lambda: reg.source("square"), "unregister": lambda: reg.unregister("square")}
    calls[listing]()
    assert (entry_points["scans"], reg.get("sqrt"), entry_points["scans"]) == (1, math.sqrt, 1)
