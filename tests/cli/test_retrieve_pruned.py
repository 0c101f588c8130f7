"""``edgewise retrieve`` prunes by default, and says so: over a small store, the ``--table`` line of a
chunk pruning cut reads "pruned to K of N characters, fits" with its ``debug_info.pruned`` numbers,
its JSON record carries them, and the prompt printed alone says on stderr how much was kept."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.models
pytest.importorskip("lancedb", reason="needs the index extra: pip install -e '.[index]'")
pytest.importorskip("onnxruntime", reason="needs the models extra")

from edgewise.cli import main  # noqa: E402
from edgewise.packing.debug import CHUNK_KEYS, PRUNED_KEY  # noqa: E402

QUESTION = "How old must a senator be?"
SENATE = ("The Senate of the United States shall be composed of two Senators from each State. No Person shall be a "
          "Senator who shall not have attained to the Age of thirty Years. The bananas of the harbour market are "
          "sold in the morning. A lighthouse stands at the end of the pier, painted white and red. The ferry leaves "
          "at noon and comes back at dusk. Gulls circle the fishing boats when they come in.")
OTHER = "The harbour is busy in summer. Fishing boats leave before dawn and sell their catch at the quay."


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from edgewise.index import index_paths

    folder = tmp_path_factory.mktemp("pruned")
    (folder / "docs").mkdir()
    (folder / "docs" / "senate.txt").write_text(SENATE + "\n")
    (folder / "docs" / "harbour.txt").write_text(OTHER + "\n")
    index_paths([folder / "docs"], folder / "store")
    return str(folder / "store")


def retrieve(capsys, store, *flags):
    code = main(["retrieve", QUESTION, "--store", store, "--top-n", "2", "--layout", "paper", *flags])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


def test_retrieve_table_says_which_chunks_pruning_cut_and_how_much_each_kept(capsys, store):
    out, _ = retrieve(capsys, store, "--format", "json")
    d = json.loads(out)["debug_info"]
    cut = {p["id"]: p for p in d["pruned"]}
    assert cut and all(p["kept_chars"] < p["original_chars"] for p in cut.values())  # the default cuts
    assert {r["outcome"] for r in d["chunks"]} == {"placed"}
    for r in d["chunks"]:  # the whole record: what pruning kept, or "fits whole" for a chunk it left alone
        if r["id"] in cut:
            p = cut[r["id"]]
            assert r == {**{k: r[k] for k in CHUNK_KEYS},
                         "reason": f"pruned to {p['kept_chars']:,} of {p['original_chars']:,} characters, fits",
                         "pruned": {"original_chars": p["original_chars"], "kept_chars": p["kept_chars"],
                                    "score": p["score"]}}
            assert tuple(r) == (*CHUNK_KEYS, PRUNED_KEY)
        else:
            assert tuple(r) == CHUNK_KEYS and r["reason"] == "fits whole"
    harbour = next(r for r in d["chunks"] if r["id"].startswith("harbour-"))
    assert harbour["id"] in cut and cut[harbour["id"]]["original_chars"] == len(OTHER)

    prompt, table = retrieve(capsys, store, "--table")
    lines = table.strip().splitlines()
    assert lines[0].split() == ["id", "rank", "outcome", "where", "tokens", "reason"]
    for r in d["chunks"]:  # each chunk's line ends with its record's reason
        line = next(ln for ln in lines if ln.startswith(r["id"] + " "))
        assert line.split()[:6] == [r["id"], str(r["rank"] + 1), "placed", f"#{r['position']}", "documents",
                                    str(r["tokens"])]
        assert line.endswith("  " + r["reason"])
    assert any(ln.endswith(", fits") and "pruned to " in ln for ln in lines)

    kept, chars = sum(p["kept_chars"] for p in cut.values()), sum(p["original_chars"] for p in cut.values())
    assert retrieve(capsys, store)[1] == (
        f"edgewise: {len(cut)} of {len(d['chunks'])} chunks in the prompt pruned to {kept:,} of {chars:,} characters "
        "(--prune 0 keeps every sentence): --table or --format json gives what each kept\n")


def test_retrieve_with_prune_0_reports_every_chunk_whole(capsys, store):
    prompt, table = retrieve(capsys, store, "--prune", "0", "--table")
    assert OTHER in prompt
    reasons = [ln.split("  ")[-1].strip() for ln in table.strip().splitlines()[1:-1]]
    assert reasons == ["fits whole", "fits whole"]
    assert retrieve(capsys, store, "--prune", "0")[1] == ""
