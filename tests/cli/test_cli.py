"""The CLI: a thin layer over pack(); one-line errors with exit status 2, never a traceback."""

import json
import subprocess
import sys

import pytest

from edgewise.cli import main

CHUNKS = [{"id": "a", "text": "Paris is the capital of France.", "score": 0.9},
          {"id": "b", "text": "Lyon is a city in France.", "score": 0.4},
          {"id": "c", "text": "Bananas are yellow.", "score": 0.1}]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def chunks_file(tmp_path):
    path = tmp_path / "chunks.json"
    path.write_text(json.dumps(CHUNKS))
    return str(path)


def test_pack_json_output_equals_the_library(capsys, chunks_file):
    from edgewise import pack

    code, out, err = run(capsys, "pack", "--query", "capital?", "--chunks", chunks_file, "--budget", "400", "--format", "json")
    assert (code, err) == (0, "")
    assert json.loads(out) == pack("capital?", CHUNKS, budget=400).to_dict()


def test_pack_reads_jsonl_from_stdin(monkeypatch, capsys):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(json.dumps(c) for c in CHUNKS) + "\n"))
    code, out, _ = run(capsys, "pack", "-q", "capital?", "-c", "-", "--layout", "paper", "--order", "relevance", "-t", "words")
    assert code == 0
    assert out.splitlines()[2:5] == [
        "Document [1](Title: ) Paris is the capital of France.",
        "Document [2](Title: ) Lyon is a city in France.",
        "Document [3](Title: ) Bananas are yellow.",
    ]


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_message_formats(capsys, chunks_file, fmt):
    from edgewise import pack

    code, out, _ = run(capsys, "pack", "-q", "capital?", "-c", chunks_file, "-f", fmt, "-b", "500")
    assert code == 0 and json.loads(out) == pack("capital?", CHUNKS, budget=500).messages(fmt)


def test_a_prompt_printed_without_its_record_says_what_was_left_out(capsys, chunks_file):
    from edgewise import pack
    from edgewise.cli.pack import table

    args = ("pack", "-q", "capital?", "-c", chunks_file, "-b", "56", "--layout", "paper", "-t", "words")
    packed = pack("capital?", CHUNKS, budget=56, layout="paper", tokenizer="words")
    assert [d["id"] for d in packed.debug_info.dropped] == ["c"]
    note = ("edgewise: 1 of 3 chunks left out of the prompt (budget 56 tokens): "
            "--table or --format json gives each reason\n")
    for fmt in ("text", "openai", "anthropic"):
        code, out, err = run(capsys, *args, "-f", fmt)
        assert (code, err) == (0, note), fmt
    code, out, err = run(capsys, *args, "--table")
    assert (code, out, err) == (0, packed.prompt + "\n", "\n" + table(packed) + "\n")
    code, out, err = run(capsys, *args, "-f", "json")  # the record is in the output
    assert (code, err) == (0, "") and json.loads(out)["debug_info"]["dropped"] == packed.debug_info.dropped
    code, out, err = run(capsys, "pack", "-q", "capital?", "-c", chunks_file, "-b", "400")  # nothing left out
    assert (code, err) == (0, "")


def test_variants_and_list(capsys, chunks_file):
    code, out, _ = run(capsys, "variants", "-q", "q", "-c", chunks_file, "--key-id", "c", "-f", "json", "-t", "words")
    assert code == 0
    assert {k: v["debug_info"]["order"] for k, v in json.loads(out).items()} == {
        "first": ["c", "a", "b"], "middle": ["a", "c", "b"], "last": ["a", "b", "c"]}
    code, out, _ = run(capsys, "list")
    assert out.splitlines()[0] == "orders: edges, auto, edges-mirror, relevance, reverse, original, middle-boost, position:K|first|middle|last, calibrated:PROFILE.json"


@pytest.mark.parametrize(
    "args, content, message",
    [
        (["--budget", "10"], None, "edgewise: error: budget must hold the fixed layers"),
        (["--top-k", "0"], None, "edgewise: error: top_k must be > 0, but got 0"),
        (["--order", "zigzag"], None, "edgewise: error: unknown order 'zigzag'; choose one of:"),
        (["--layout", "poem"], None, "edgewise: error: unknown layout 'poem'"),
        (["--tokenizer", "gpt9"], None, "edgewise: error: unknown tokenizer 'gpt9'"),
        ([], '[{"text": "a"},\n {"text": ', "edgewise: error: chunks.json line 2: invalid JSON"),
        ([], '{"text": "a"}\n{"text": 5}\n', "edgewise: error: chunk #1: text must be a string, but got int"),
        ([], '{"text": "a", "score": NaN}\n', "edgewise: error: chunks.json line 1 (chunk #0): score must be a finite number, but got NaN"),
        ([], '{"text": "a"}\nnot json\n', "edgewise: error: chunks.json line 2: invalid JSON"),
        (["--order", "calibrated:missing.json"], None, "edgewise: error: profile file 'missing.json' could not be read"),
    ],
)
def test_errors_are_one_line_with_status_2(capsys, tmp_path, monkeypatch, args, content, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chunks.json").write_text(content if content is not None else json.dumps(CHUNKS))
    code, out, err = run(capsys, "pack", "-q", "q", "-c", "chunks.json", *args)
    assert (code, out) == (2, "")
    assert err.startswith(message) and err.count("\n") == 1, err


def test_the_installed_command_runs_and_fails_cleanly(tmp_path, chunks_file):
    ok = subprocess.run([sys.executable, "-m", "edgewise", "pack", "-q", "q", "-c", chunks_file, "-t", "words"],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.startswith("[System]")
    bad = subprocess.run([sys.executable, "-m", "edgewise", "pack", "-q", "q", "-c", str(tmp_path / "nope.json")],
                         capture_output=True, text=True)
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == f"edgewise: error: chunks file '{tmp_path / 'nope.json'}' could not be read: No such file or directory\n"


def test_import_is_light_and_a_base_install_packs(chunks_file):
    """`import edgewise` loads no heavy module; pack works with every optional extra blocked."""
    probe = (
        "import sys, edgewise\n"
        "heavy = {'numpy', 'onnxruntime', 'torch', 'tokenizers', 'tiktoken', 'jinja2', 'llama_cpp', 'matplotlib'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    blocked = (
        "import sys\n"
        "for name in ('numpy', 'onnxruntime', 'torch', 'tokenizers', 'llama_cpp', 'matplotlib', 'haystack'):\n"
        "    sys.modules[name] = None  # importing any of them now raises ImportError\n"
        "from edgewise.cli import main\n"
        f"sys.exit(main(['pack', '-q', 'capital?', '-c', {chunks_file!r}, '-b', '300']))\n"
    )
    run_ = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True)
    assert run_.returncode == 0 and "Paris is the capital of France." in run_.stdout, run_.stderr


def test_usage_errors_are_one_line_too(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["pack", "-q", "q", "-c", "x.json", "--format", "xml"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err == ("edgewise pack: error: argument --format/-f: invalid choice: 'xml' "
                   "(choose from 'text', 'json', 'openai', 'anthropic') (see edgewise pack --help)\n")


def option_help(text: str) -> dict[str, str]:
    """Each option of a --help text: its flags -> its help, the wrapped lines joined."""
    out, flags = {}, None
    for line in text.splitlines():
        if line.startswith("  -"):
            flags, _, rest = line.strip().partition("  ")
            out[flags] = rest.strip()
        elif flags is not None and line.startswith(" " * 6):
            out[flags] = f"{out[flags]} {line.strip()}".strip()
        else:
            flags = None
    return out


def names(kind: str, hide: tuple[str, ...] = ()) -> str:
    from edgewise.registry import describe

    return ", ".join(name for name, _ in describe((kind,))[kind] if name not in hide)


def test_help_lists_every_registry_option_s_names(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # one line per option: argparse also wraps at hyphens
    shown = {}
    for command in ("pack", "variants", "score"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        shown[command] = option_help(capsys.readouterr().out)
    pack_names = {
        "--tokenizer TOKENIZER, -t TOKENIZER": f"tokenizer that counts the budget; one of: {names('tokenizers')} (default cl100k_base)",
        "--order ORDER, -o ORDER": f"placement strategy; one of: {names('orders')} (default edges)",
        "--layout LAYOUT, -l LAYOUT": f"prompt layout; one of: {names('layouts')} (default sections)",
        "--scorer SCORER": f"score chunks that have no score (or all, with rescore); one of: {names('scorers')}",
    }
    assert {flags: shown["pack"][flags] for flags in pack_names} == pack_names
    variants_names = {**pack_names, "--layout LAYOUT, -l LAYOUT": f"prompt layout; one of: {names('layouts')} (default layered)"}
    del variants_names["--order ORDER, -o ORDER"]  # variants moves one chunk itself: no --order
    assert {flags: shown["variants"][flags] for flags in variants_names} == variants_names
    assert "--order ORDER, -o ORDER" not in shown["variants"]
    assert shown["score"]["--scorer SCORER, -s SCORER"] == (
        f"one of: {names('scorers', hide=('given',))} (cross:PATH, dense:PATH) (default bm25)")


def test_the_names_are_looked_up_when_help_is_shown_not_when_the_parser_is_built(monkeypatch):
    """Building and using the `pack` parser lists no registry (listing loads plugins); help does."""
    import argparse

    import edgewise
    from edgewise import registry
    from edgewise.cli import build_parser
    from edgewise.layout import LAYOUTS
    from edgewise.order import ORDERS
    from edgewise.score import SCORERS
    from edgewise.tokens.tokenizers import TOKENIZERS

    monkeypatch.setenv("COLUMNS", "1000")
    scans = []
    monkeypatch.setattr(registry, "_entry_points", lambda group: scans.append(group) or [])
    for reg in (TOKENIZERS, ORDERS, LAYOUTS, SCORERS):
        monkeypatch.setattr(reg, "_plugins_done", False)  # as in a fresh process: plugins not read yet
    parser = build_parser(["pack"])
    args = parser.parse_args(["pack", "-q", "q", "-c", "x.json", "--order", "relevance"])
    assert (args.order, scans) == ("relevance", [])
    edgewise.register_order("test-late", lambda n, ctx: list(range(n)))  # after the parser was built
    try:
        pack_parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["pack"]
        shown = option_help(pack_parser.format_help())
        listed = names("orders")
    finally:
        ORDERS.unregister("test-late")
    assert scans == ["edgewise.tokenizers", "edgewise.orders", "edgewise.layouts", "edgewise.scorers"]
    assert listed.endswith(", test-late")
    assert shown["--order ORDER, -o ORDER"] == f"placement strategy; one of: {listed} (default edges)"


def test_variants_keeps_an_explicit_sections_layout(tmp_path, capsys):
    """--layout sections is the pack default; variants' own default is layered: the flag must win."""
    import json as _json

    from edgewise.cli import main as _main

    chunks = tmp_path / "c.json"
    chunks.write_text(_json.dumps([{"id": "a", "text": "alpha", "score": 1.0}, {"id": "b", "text": "beta", "score": 0.5}]))
    for given, want in ((["--layout", "sections"], "sections"), ([], "layered"), (["--layout", "paper"], "paper")):
        assert _main(["variants", "-q", "q", "-c", str(chunks), "--key-id", "a", "--positions", "first",
                      "--format", "json", *given]) == 0
        out = _json.loads(capsys.readouterr().out)
        assert out["first"]["debug_info"]["layout"] == want


def test_the_output_formats_are_defined_once_and_every_one_is_written(capsys, chunks_file):
    import importlib
    import re
    from pathlib import Path

    import edgewise
    from edgewise.cli import build_parser
    from edgewise.cli import pack as cli_pack

    library = importlib.import_module("edgewise.packing.front")  # the module of `edgewise.pack`, the function
    assert cli_pack.FORMATS is library.FORMATS == ("text", "json", "openai", "anthropic")
    src = Path(edgewise.__file__).parent
    defined = [str(p.relative_to(src)) for p in sorted(src.rglob("*.py"))
               if re.search(r"^\s*FORMATS\s*[:=]", p.read_text(encoding="utf-8"), re.M)]
    assert defined == ["packing/front.py"]
    for command in ("pack", "variants", "retrieve"):
        parser = build_parser([command])
        sub = next(a for a in parser._actions if a.dest == "command").choices[command]
        assert next(a for a in sub._actions if a.dest == "format").choices is library.FORMATS
    packed = edgewise.pack("capital?", CHUNKS, tokenizer="words")
    expected = {"text": packed.prompt, "json": packed.to_dict(), "openai": packed.messages("openai"),
                "anthropic": packed.messages("anthropic")}
    for fmt in library.FORMATS:
        code, out, _ = run(capsys, "pack", "-q", "capital?", "-c", chunks_file, "-t", "words", "-f", fmt)
        assert code == 0
        assert (out.rstrip("\n") if fmt == "text" else json.loads(out)) == expected[fmt]
