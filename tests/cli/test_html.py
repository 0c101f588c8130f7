"""``edgewise pack --html FILE`` and ``edgewise retrieve --html FILE``: the inspector page of one pack,
in one self-contained file.

The file holds the page's own CSS and JavaScript inlined, a Content-Security-Policy that lets only
those two run, and the pack embedded as JSON that no chunk text can break out of. Opened from
``file://`` in headless Chromium (``tests/browser.py``), it shows what the same command prints with
``--format json``: the rows, the prompt and its marks, the budget's numbers, the position curve,
and exports equal to ``--format openai`` and ``--format anthropic``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from edgewise import __version__
from edgewise.cli import main
from edgewise.serve.api import inspector

from ..browser import (
    chromium,
    download,
    expected_budget,
    expected_chunk_marks,
    expected_rows,
    given_text,
    read_page,
    wait_for,
)
from ..conftest import DATA, ROOT

QUERY_FILE = ROOT / "examples" / "query.txt"
QUERY = QUERY_FILE.read_text(encoding="utf-8").strip()
CHUNKS = json.loads((ROOT / "examples" / "chunks.json").read_text(encoding="utf-8"))
INJECTIONS = json.loads((DATA / "injections.json").read_text(encoding="utf-8"))
# a profile that places, for order=auto with model gpt-4o (found through $EDGEWISE_PROFILES)
PLACING = {"format": "edgewise-profile/1", "model": "gpt-4o", "task": "qa", "layout": "sections", "n_docs": 10,
           "accuracy": [0.9, 0.6, 0.4, 0.3, 0.2, 0.25, 0.35, 0.5, 0.65, 0.8],
           "measured": [{"position": 0, "relative_position": 0.0, "n": 200, "accuracy": 0.9, "interval": [0.85, 0.94]},
                        {"position": 9, "relative_position": 1.0, "n": 200, "accuracy": 0.8, "interval": [0.74, 0.85]},
                        {"position": 4, "relative_position": 0.444444, "n": 200, "accuracy": 0.2,
                         "interval": [0.15, 0.26]}]}


class _Scripts(HTMLParser):
    """The file's script and style elements (attributes, text) and every URL it names."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None], str]] = []
        self.urls: list[str] = []
        self.policy: str | None = None
        self._open: tuple[str, dict[str, str | None]] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.urls += [v for k, v in attrs.items() if k in ("src", "href") and v]
        if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy":
            self.policy = attrs["content"]
        if tag in ("script", "style"):
            self._open = (tag, attrs)
            self.elements.append((tag, attrs, ""))

    def handle_data(self, data):
        if self._open is not None:
            tag, attrs, text = self.elements[-1]
            self.elements[-1] = (tag, attrs, text + data)

    def handle_endtag(self, tag):
        self._open = None


def _digest(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def run(capsys, *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


@pytest.fixture
def profiles_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "gpt-4o--qa-sections-10.json").write_text(json.dumps(PLACING))
    monkeypatch.setenv("EDGEWISE_PROFILES", str(folder))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return folder


def pack_with_html(capsys, tmp_path, chunks: list, *flags: str) -> tuple[Path, dict, dict]:
    """``edgewise pack ... --html FILE`` with ``chunks``: the file, the JSON printed, and the messages
    of ``--format anthropic`` for the same pack."""
    source = tmp_path / "chunks.json"
    source.write_text(json.dumps(chunks), encoding="utf-8")
    page = tmp_path / "pack.html"
    common = ["pack", "--query", f"@{QUERY_FILE}", "--chunks", str(source), *flags]
    result = json.loads(run(capsys, *common, "--format", "json", "--html", str(page)))
    anthropic = json.loads(run(capsys, *common, "--format", "anthropic"))
    return page, result, anthropic


def test_the_file_holds_the_page_the_pack_and_a_policy_for_its_own_code_only(capsys, tmp_path, profiles_dir):
    chunks = CHUNKS[:10] + [{"id": f"evil-{i}", "text": t, "score": 0.01} for i, t in enumerate(INJECTIONS)]
    page, result, anthropic = pack_with_html(capsys, tmp_path, chunks, "--budget", "1500", "--order", "auto",
                                             "--model", "gpt-4o")
    html = page.read_text(encoding="utf-8")
    parsed = _Scripts()
    parsed.feed(html)
    (style,), (data, code) = [e for e in parsed.elements if e[0] == "style"], [e for e in parsed.elements if e[0] == "script"]
    assert (style[2], code[2], code[1]) == (inspector.asset("inspector.css"), inspector.asset("inspector.js"), {})
    assert data[1] == {"type": "application/json", "id": inspector.VIEW_ID}
    assert parsed.urls == []  # nothing linked, nothing fetched
    assert parsed.policy == (f"default-src 'none'; script-src '{_digest(code[2])}'; style-src '{_digest(style[2])}'; "
                             "base-uri 'none'; form-action 'none'")
    assert "<" not in data[2] and ">" not in data[2]  # no chunk text can close the block or open a comment
    debug = result["debug_info"]
    assert json.loads(data[2]) == {
        "source": f"edgewise pack (edgewise {__version__})", "query": QUERY, "chunks": chunks,
        "options": {"budget": 1500, "order": "auto", "model": "gpt-4o"}, "messages_format": "openai",
        "result": result, "messages": {"openai": result["messages"], "anthropic": anthropic},
        "pruning": None, "curve": {"name": "gpt-4o/qa-sections-10", "accuracy": PLACING["accuracy"],
                                   "measured": PLACING["measured"]}}
    assert debug["placement"]["profile"]["name"] == "gpt-4o/qa-sections-10"


def test_a_file_that_cannot_be_written_is_a_one_line_error_before_any_output(capsys, tmp_path):
    code = main(["pack", "--query", "q", "--chunks", str(ROOT / "examples" / "chunks.json"), "--html",
                 str(tmp_path / "missing" / "page.html")])
    out, err = capsys.readouterr()
    assert (code, out, err) == (2, "", f"edgewise: error: --html must name a file that can be written, but "
                                      f"'{tmp_path / 'missing' / 'page.html'}' cannot: No such file or directory\n")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with chromium(tmp_path_factory.mktemp("chromium")) as driver:
        yield driver


@pytest.mark.slow
def test_the_file_shows_in_the_browser_what_the_pack_printed(capsys, tmp_path, profiles_dir, browser):
    chunks = CHUNKS[:10] + [{"id": f"evil-{i}", "text": t, "score": 0.01} for i, t in enumerate(INJECTIONS)]
    page_file, result, anthropic = pack_with_html(capsys, tmp_path, chunks, "--budget", "1500", "--order", "auto",
                                                  "--model", "gpt-4o")
    browser.get(page_file.as_uri())
    page = wait_for(browser, lambda p: p["state"] == "ready", "the embedded pack")
    debug = result["debug_info"]
    assert page["rows"] == expected_rows(debug)
    assert page["prompt"] == result["prompt"]
    assert page["chunks"] == expected_chunk_marks(debug)
    assert page["marks"] == ["System", "Task instructions", "A", "B", "C", "Question", "Expected output"]
    assert page["budget"] == expected_budget(debug)
    assert page["texts"] == [given_text(c) for c in chunks]
    rank = {r["id"]: str(r["rank"] + 1) for r in debug["chunks"]}
    assert page["dots"] == [[cid, slot, rank[cid]] for slot, cid in enumerate(debug["order"])]
    assert page["curve_note"] == f"order auto: {debug['placement']['reason']}"
    shown = browser.execute_script(
        "return [document.body.dataset.mode, document.getElementById('request-query').textContent,"
        "[...document.querySelectorAll('#request-options dd')].map((d) => [d.previousSibling.textContent, d.textContent]),"
        "window.__edgewise_pwned, document.querySelectorAll('img, script:not([type])').length]")
    assert shown == ["file", QUERY, [["budget", "1500"], ["order", '"auto"'], ["model", '"gpt-4o"']], None, 1]
    assert download(browser, "export-prompt") == result["prompt"]
    assert json.loads(download(browser, "export-messages")) == result["messages"]
    assert json.loads(download(browser, "export-debug")) == debug
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", "messages-format")).select_by_value("anthropic")
    assert json.loads(download(browser, "export-messages")) == anthropic
    assert read_page(browser)["renders"] == 1  # the other format was in the file: nothing packed again


@pytest.mark.slow
@pytest.mark.models
def test_retrieve_html_shows_the_hits_and_what_pruning_kept_of_each(capsys, tmp_path, browser):
    pytest.importorskip("lancedb", reason="needs the index extra: pip install -e '.[index]'")
    pytest.importorskip("onnxruntime", reason="needs the models extra")
    from edgewise.chunk import normalize
    from edgewise.index import index_paths
    from edgewise.index.lance import open_store
    from edgewise.index.search import retrieve
    from edgewise.prune.steps import prune

    senate = ("The Senate of the United States shall be composed of two Senators from each State. No Person shall be "
              "a Senator who shall not have attained to the Age of thirty Years. The bananas of the harbour market are "
              "sold in the morning. A lighthouse stands at the end of the pier, painted white and red.")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "senate.txt").write_text(senate + "\n")
    (tmp_path / "docs" / "harbour.txt").write_text("The harbour is busy in summer. Boats <script>x()</script> leave.\n")
    index_paths([tmp_path / "docs"], tmp_path / "store")
    question, page_file = "How old must a senator be?", tmp_path / "retrieve.html"
    out = run(capsys, "retrieve", question, "--store", str(tmp_path / "store"), "--top-n", "2", "--format", "json",
              "--html", str(page_file))
    result = json.loads(out)
    browser.get(page_file.as_uri())
    page = wait_for(browser, lambda p: p["state"] == "ready", "the embedded retrieval")
    debug = result["debug_info"]
    hits = [h.chunk() for h in retrieve(open_store(str(tmp_path / "store")), question, top_n=2, mode="hybrid")]
    assert (page["rows"], page["prompt"], page["budget"]) == (expected_rows(debug), result["prompt"],
                                                              expected_budget(debug))
    assert page["texts"] == [h["text"] for h in hits]
    cut = {p["id"] for p in debug["pruned"]}
    assert cut  # retrieve prunes by default (0.05)
    chunks = normalize(hits)[0]
    kept = {c.id: (c.text, p.spans) for c, p in zip(chunks, prune(question, chunks, 0.05))}
    assert page["kept"] == [[s.text for s in kept[h["id"]][1]] if h["id"] in cut else [] for h in hits]
    assert page["struck"] == [_gaps(*kept[h["id"]]) if h["id"] in cut else [] for h in hits]


def _gaps(text: str, spans) -> list[str]:
    """The text between (and around) the kept sentences that holds more than white space."""
    edges = [0, *[x for s in spans for x in (s.start, s.end)], len(text)]
    return [text[a:b] for a, b in zip(edges[::2], edges[1::2]) if text[a:b].strip()]
