"""The inspector page at ``/ui``, in a real browser against a real server.

A server (API key, ``--assets`` holding a profile file, ``$EDGEWISE_PROFILES`` holding a profile that
places) runs as a subprocess on 127.0.0.1; headless Chromium loads ``/ui``, packs the bundled
example, moves the budget slider, and what the page shows (rows, outcomes, section marks, the
prompt, the budget's numbers, the position curve, the exports) is compared whole with what a
direct ``/v1/pack`` call with the same options answers. Hostile chunks show as text and run
nothing; generated inputs give rows equal to their debug records. Without Chromium the browser
tests skip (``tests/browser.py``); the checks of what the server sends need no browser.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from edgewise.order import profiles  # noqa: E402
from edgewise.serve.api import inspector  # noqa: E402

from ..browser import (  # noqa: E402
    chromium,
    download,
    expected_budget,
    expected_chunk_marks,
    expected_rows,
    given_text,
    rendered_after,
    wait_for,
)
from ..conftest import DATA, ROOT  # noqa: E402
from ..servers import running  # noqa: E402

KEY = "inspector-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
QUERY = (ROOT / "examples" / "query.txt").read_text(encoding="utf-8").strip()
CHUNKS = json.loads((ROOT / "examples" / "chunks.json").read_text(encoding="utf-8"))
INJECTIONS = json.loads((DATA / "injections.json").read_text(encoding="utf-8"))
SECTIONS_MARKS = ["System", "Task instructions", "A", "B", "C", "Question", "Expected output"]
# a profile that places: its first and last places are measurably better than its middle
PLACING = {"format": "edgewise-profile/1", "model": "gpt-4o", "task": "qa", "layout": "sections", "n_docs": 10,
           "accuracy": [0.9, 0.6, 0.4, 0.3, 0.2, 0.25, 0.35, 0.5, 0.65, 0.8],
           "measured": [{"position": 0, "relative_position": 0.0, "n": 200, "accuracy": 0.9, "interval": [0.85, 0.94]},
                        {"position": 4, "relative_position": 0.444444, "n": 200, "accuracy": 0.2,
                         "interval": [0.15, 0.26]},
                        {"position": 9, "relative_position": 1.0, "n": 200, "accuracy": 0.8, "interval": [0.74, 0.85]}]}
CALIBRATED = [0.2, 0.9, 0.5, 0.1]  # a bare curve for calibrated:FILE, best second


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[dict]:
    tmp = tmp_path_factory.mktemp("inspector")
    (tmp / "assets").mkdir()
    (tmp / "assets" / "curve.json").write_text(json.dumps(CALIBRATED))
    (tmp / "profiles").mkdir()
    (tmp / "profiles" / "gpt-4o--qa-sections-10.json").write_text(json.dumps(PLACING))
    env = {"EDGEWISE_API_KEY": KEY, "EDGEWISE_PROFILES": str(tmp / "profiles"), "XDG_CONFIG_HOME": str(tmp / "config")}
    with running(["--assets", str(tmp / "assets")], tmp, env) as srv:
        with httpx.Client(base_url=srv["url"], headers=AUTH, timeout=60) as client:
            srv["client"] = client
            yield srv


def packed(server: dict, options: dict, chunks: list | None = None, query: str = QUERY, fmt: str = "openai") -> dict:
    r = server["client"].post("/v1/pack", json={"query": query, "chunks": CHUNKS if chunks is None else chunks,
                                                "options": options, "messages_format": fmt})
    assert r.status_code == 200, r.text
    return r.json()


# -- what the server sends: no browser needed ----------------------------------------------------


def test_ui_serves_the_page_its_files_and_its_policy(server):
    page = httpx.get(f"{server['url']}/ui")  # no key: a browser's navigation sends none
    assert page.status_code == 200
    assert {k: page.headers[k] for k in ("content-type", "content-security-policy", "x-content-type-options",
                                         "x-frame-options", "referrer-policy")} == {
        "content-type": "text/html; charset=utf-8", "content-security-policy": inspector.SERVED_POLICY,
        "x-content-type-options": "nosniff", "x-frame-options": "DENY", "referrer-policy": "no-referrer"}
    assert page.text == inspector.page()
    assert re.findall(r'(?:src|href)="([^"#]+)"', page.text) == ["/ui/inspector.css", "/ui/inspector.js"]
    for name, kind in (("inspector.js", "text/javascript"), ("inspector.css", "text/css")):
        r = httpx.get(f"{server['url']}/ui/{name}")
        assert (r.status_code, r.headers["content-type"], r.text) == (200, f"{kind}; charset=utf-8", inspector.asset(name))
        assert r.headers["content-security-policy"] == inspector.SERVED_POLICY
    r = httpx.get(f"{server['url']}/ui/secrets.txt")
    assert (r.status_code, r.json()["error"]["message"]) == (
        404, "the inspector's files are inspector.css, inspector.js, but got 'secrets.txt'")
    assert [p for p in server["client"].get("/openapi.json").json()["paths"] if p.startswith("/ui")] == []


def test_the_page_fetches_nothing_from_elsewhere_and_never_parses_text_as_markup():
    files = {name: inspector.asset(name) for name in inspector.ASSETS}
    # the only URL in the page's files is the SVG namespace, a name and not a fetch
    assert sorted({u for text in files.values() for u in re.findall(r"https?://[^\s\"')]+", text)}) == [
        "http://www.w3.org/2000/svg"]
    sinks = ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "srcdoc",
             "createContextualFragment", "DOMParser", "setAttribute(\"on", "javascript:")
    assert [s for s in sinks if s in files["inspector.js"]] == []
    assert [t for t in ("</script", "<!--") if t in files["inspector.js"]] == []  # safe to inline


def test_curve_answers_with_the_profile_or_the_file_and_refuses_the_rest(server):
    client = server["client"]
    found = profiles.load(str(ROOT / "src" / "edgewise" / "data" / "profiles" / "gemma-3-270m--qa-paper-20.json"))
    r = client.get("/ui/curve", params={"profile": "gemma-3-270m/qa-paper-20"})
    assert (r.status_code, r.json()) == (200, {"name": found.name, "accuracy": list(found.accuracy),
                                              "measured": [dict(m) for m in found.measured]})
    r = client.get("/ui/curve", params={"profile": "gpt-4o/qa-sections-10"})
    assert r.json() == {"name": "gpt-4o/qa-sections-10", "accuracy": PLACING["accuracy"], "measured": PLACING["measured"]}
    r = client.get("/ui/curve", params={"strategy": "calibrated:curve.json"})
    assert r.json() == {"name": "curve.json", "accuracy": CALIBRATED, "measured": []}
    refused = {
        "no key": httpx.get(f"{server['url']}/ui/curve", params={"profile": "gemma-3-270m/qa-paper-20"}),
        "outside": client.get("/ui/curve", params={"strategy": "calibrated:../profiles/gpt-4o--qa-sections-10.json"}),
        "absolute": client.get("/ui/curve", params={"strategy": "calibrated:/etc/hostname"}),
        "unknown": client.get("/ui/curve", params={"profile": "nobody/qa-paper-3"}),
        "not a profile order": client.get("/ui/curve", params={"strategy": "edges"}),
        "both": client.get("/ui/curve", params={"strategy": "edges", "profile": "x"}),
    }
    assert {k: (r.status_code, r.json()["error"]["message"]) for k, r in refused.items()} == {
        "no key": (401, "this server needs an API key: send 'Authorization: Bearer <key>'"),
        "outside": (403, "order 'calibrated:../profiles/gpt-4o--qa-sections-10.json' names a file outside the assets "
                         "directory"),
        "absolute": (403, "order 'calibrated:/etc/hostname' names an absolute path; name files relative to the "
                          "assets directory"),
        "unknown": (404, "no position curve for profile 'nobody/qa-paper-3': edgewise list shows the profiles found"),
        "not a profile order": (404, "no position curve for order 'edges': edgewise list shows the profiles found"),
        "both": (422, "/ui/curve takes one of profile (a profile's name) or strategy (calibrated:FILE)"),
    }


# -- in the browser ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser(tmp_path_factory) -> Iterator[object]:
    with chromium(tmp_path_factory.mktemp("chromium")) as driver:
        yield driver


@pytest.fixture
def ui(browser, server):
    """``/ui`` freshly loaded, the API key typed in, the server's capabilities read."""
    browser.get(f"{server['url']}/ui")
    first = wait_for(browser, lambda p: p["state"] == "error", "the missing key")
    assert first["status"] == ("GET /v1/capabilities: 401 this server needs an API key: send 'Authorization: "
                               "Bearer <key>' (an API key goes in Options)")
    browser.find_element("id", "api-key").send_keys(KEY)
    wait_for(browser, lambda p: p["state"] == "idle", "the capabilities read with the key")
    return browser


def set_value(driver, element_id: str, value: str) -> None:
    """Put ``value`` in a text field as typing would (an input event), without typing it key by key."""
    driver.execute_script("const e = document.getElementById(arguments[0]); e.value = arguments[1];"
                          "e.dispatchEvent(new Event('input', {bubbles: true}));", element_id, value)


def choose(driver, element_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("id", element_id)).select_by_value(value)


def assert_shows(page: dict, result: dict) -> None:
    """The page shows ``result`` (a /v1/pack reply): rows, prompt, chunk marks and budget, whole."""
    debug = result["debug_info"]
    assert page["rows"] == expected_rows(debug)
    assert page["prompt"] == result["prompt"]
    assert page["chunks"] == expected_chunk_marks(debug)
    assert page["budget"] == expected_budget(debug)
    assert page["bar"] == [name for name, _ in expected_budget(debug)]


@pytest.mark.slow
def test_the_page_packs_the_example_and_follows_the_budget_slider(ui, server):
    from selenium.webdriver.common.action_chains import ActionChains

    ui.find_element("id", "query").send_keys(QUERY)
    ui.find_element("id", "file").send_keys(str(ROOT / "examples" / "chunks.json"))
    page = wait_for(ui, lambda p: p["state"] == "ready", "the example packed")
    result = packed(server, {"budget": 2000})
    assert_shows(page, result)
    assert page["marks"] == SECTIONS_MARKS
    assert {r[4] for r in page["rows"]} == {"placed", "summarized", "dropped"}
    assert page["texts"] == [given_text(c) for c in CHUNKS]
    # each chunk block of the prompt runs from its opening tag to its closing one
    assert [(t.split(" ", 1)[0], t.split("\n")[-2]) for t in page["chunk_texts"]] == [
        ("<reminder", "</reminder>") if reminder else ("<doc", "</doc>") for _, _, _, reminder in page["chunks"]]
    slider = ui.find_element("id", "budget")
    ActionChains(ui).click_and_hold(slider).move_by_offset(-slider.size["width"] // 3, 0).release().perform()
    moved = wait_for(ui, lambda p: p["state"] == "ready" and p["renders"] > page["renders"] and p["rows"] != page["rows"]
                     and str(budget_shown(ui)) == ui.find_element("id", "budget-value").get_attribute("value"),
                     "a render at the slider's new budget")
    budget = int(ui.find_element("id", "budget-value").get_attribute("value"))
    assert 50 <= budget < 2000
    assert_shows(moved, packed(server, {"budget": budget}))


def budget_shown(driver) -> str:
    return driver.execute_script("return document.querySelector('#stats dd[data-name=\"budget\"]').textContent")


@pytest.mark.slow
def test_the_exports_are_what_v1_pack_answers(ui, server):
    set_value(ui, "query", QUERY)
    set_value(ui, "chunks", json.dumps(CHUNKS))
    set_value(ui, "budget-value", "900")
    page = wait_for(ui, lambda p: p["state"] == "ready", "the pack at budget 900")
    result = packed(server, {"budget": 900})
    assert_shows(page, result)
    assert page["exports"] == ["prompt.txt", "messages-openai.json", "debug_info.json", "request.json"]
    assert download(ui, "export-prompt") == result["prompt"]
    assert json.loads(download(ui, "export-messages")) == result["messages"]
    assert json.loads(download(ui, "export-debug")) == result["debug_info"]
    assert json.loads(download(ui, "export-request")) == {"query": QUERY, "chunks": CHUNKS, "options": {"budget": 900},
                                                          "messages_format": "openai"}
    choose(ui, "messages-format", "anthropic")
    again = rendered_after(ui, page["renders"])
    assert again["exports"] == ["prompt.txt", "messages-anthropic.json", "debug_info.json", "request.json"]
    anthropic = packed(server, {"budget": 900}, fmt="anthropic")
    assert json.loads(download(ui, "export-messages")) == anthropic["messages"]
    assert anthropic["messages"]["system"] == result["messages"][0]["content"]


@pytest.mark.slow
def test_auto_and_calibrated_orders_show_the_curve_and_where_each_chunk_landed(ui, server):
    set_value(ui, "query", QUERY)
    set_value(ui, "chunks", json.dumps(CHUNKS[:10]))
    choose(ui, "model", "gpt-4o")
    choose(ui, "order", "auto")
    page = wait_for(ui, lambda p: p["state"] == "ready" and p["dots"], "the curve of the placing profile")
    result = packed(server, {"budget": 2000, "order": "auto", "model": "gpt-4o"}, CHUNKS[:10])
    debug = result["debug_info"]
    assert_shows(page, result)
    assert debug["placement"]["profile"]["name"] == "gpt-4o/qa-sections-10"
    assert debug["strategy"].startswith("calibrated:")
    rank = {r["id"]: str(r["rank"] + 1) for r in debug["chunks"]}
    assert page["dots"] == [[cid, slot, rank[cid]] for slot, cid in enumerate(debug["order"])]
    assert page["curve_points"] == [len(PLACING["accuracy"])]
    assert page["curve_note"] == f"order auto: {debug['placement']['reason']}"
    choose(ui, "order", "calibrated:PROFILE.json")
    set_value(ui, "order-arg", "curve.json")
    page = wait_for(ui, lambda p: p["state"] == "ready" and p["curve_points"] == [len(CALIBRATED)], "the file's curve")
    result = packed(server, {"budget": 2000, "order": "calibrated:curve.json", "model": "gpt-4o"}, CHUNKS[:10])
    assert_shows(page, result)
    rank = {r["id"]: str(r["rank"] + 1) for r in result["debug_info"]["chunks"]}
    assert page["dots"] == [[cid, slot, rank[cid]] for slot, cid in enumerate(result["debug_info"]["order"])]
    assert page["curve_note"] == "order calibrated: the profile curve.json placed the chunks"


@pytest.mark.slow
def test_pruned_sentences_are_struck_through_and_kept_ones_marked(ui, server):
    set_value(ui, "query", QUERY)
    set_value(ui, "chunks", json.dumps(CHUNKS))
    ui.find_element("id", "prune-on").click()
    choose(ui, "prune-scorer", "lexical")
    page = wait_for(ui, lambda p: p["state"] == "ready" and any(p["kept"]), "the pruned chunks")
    options = {"budget": 2000, "prune": 0.3, "prune_scorer": "lexical"}
    result = packed(server, options)
    assert_shows(page, result)
    cut = [r for r in result["debug_info"]["chunks"] if "pruned" in r]
    assert cut and {r[4] for r in page["rows"]} >= {"pruned"}
    r = server["client"].post("/v1/prune", json={"query": QUERY, "chunks": [CHUNKS[r["input_index"]] for r in cut],
                                                 "threshold": 0.3, "scorer": "lexical"})
    spans = {c["id"]: c["meta"]["prune"]["spans"] for c in r.json()}
    kept, struck = [[] for _ in CHUNKS], [[] for _ in CHUNKS]
    for rec in cut:
        text, at = CHUNKS[rec["input_index"]]["text"], 0
        for s in spans[rec["id"]]:
            struck[rec["input_index"]] += [text[at:s["start"]]] if text[at:s["start"]].strip() else []
            kept[rec["input_index"]].append(s["text"])
            at = s["end"]
        struck[rec["input_index"]] += [text[at:]] if text[at:].strip() else []
    assert (page["kept"], page["struck"]) == (kept, struck)
    assert page["texts"] == [given_text(c) for c in CHUNKS]  # struck through, not taken out


@pytest.mark.slow
def test_hostile_chunks_show_as_text_and_run_nothing(ui, server):
    chunks = [{"id": f"<i>{i}</i>\"'&", "text": text, "title": "<b onmouseover=x()>t</b>"}
              for i, text in enumerate(INJECTIONS)]
    query = "<script>window.__edgewise_pwned = 'query'</script> what?"
    set_value(ui, "query", query)
    set_value(ui, "chunks", json.dumps(chunks))
    page = wait_for(ui, lambda p: p["state"] == "ready", "the hostile chunks packed")
    result = packed(server, {"budget": 2000}, chunks, query)
    assert_shows(page, result)
    assert page["texts"] == INJECTIONS
    assert [row[1] for row in page["rows"]] == [c["id"] for c in chunks]
    assert [text for text in INJECTIONS if "<script>" in text or "onerror" in text]  # the corpus holds markup
    tags = ui.execute_script("return [...new Set([...document.querySelectorAll('#prompt *, #rows *')]"
                             ".map((e) => e.tagName.toLowerCase()))].sort()")
    assert tags == ["a", "details", "div", "span", "summary", "td", "tr"]
    assert ui.execute_script("return [window.__edgewise_pwned, document.querySelectorAll('img, svg:not(#curve svg), "
                             "script:not([src])').length]") == [None, 0]


@pytest.mark.slow
def test_generated_inputs_give_rows_equal_to_the_debug_record(ui, server):
    rng = random.Random(20240611)
    words = ["compaction", "shard", "<b>", "index", "&amp;", "planner", "é", "🙂", "v4", "stall", "\u2028", "Paris"]
    seen: set[str] = set()
    for case in range(8):
        scored = rng.random() < 0.7  # scores for every chunk or for none (then bm25 scores them)
        chunks = []
        for i in range(rng.randint(1, 12)):
            cid = rng.choice([f"d{i}", f"<x{i}>", f"d{rng.randint(0, 3)}"])  # some repeat: merged duplicates
            text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 60))).replace(" stall", ".\nstall")
            item = {"id": cid, "text": text, **({"score": rng.randint(0, 1000) / 1000} if scored else {})}
            if rng.random() < 0.3:
                item["title"] = rng.choice(words)
            chunks.append(text if not scored and rng.random() < 0.2 else item)
        options = {"layout": ["sections", "layered", "paper", "kv"][case % 4],
                   "tokenizer": rng.choice(["words", "cl100k_base"]), "order": rng.choice(["edges", "relevance", "original"]),
                   **({} if scored else {"scorer": "bm25"})}
        query, budget = f"what stalls the planner? {case}", rng.randint(120, 900)
        r = server["client"].post("/v1/pack", json={"query": query, "chunks": chunks,
                                                    "options": {"budget": budget, **options}})
        set_value(ui, "more", json.dumps(options))
        set_value(ui, "query", query)
        set_value(ui, "chunks", json.dumps(chunks))
        set_value(ui, "budget-value", str(budget))
        if r.status_code != 200:  # a budget too small for the fixed layers: the page says what the server said
            status = f"POST /v1/pack: 422 {r.json()['error']['message']}"
            wait_for(ui, lambda p, status=status: p["state"] == "error" and p["status"] == status, status)
            continue
        rows = expected_rows(r.json()["debug_info"])
        page = wait_for(ui, lambda p, rows=rows: p["state"] == "ready" and p["rows"] == rows, f"the rows of case {case}")
        assert_shows(page, r.json())
        assert page["texts"] == [given_text(c) for c in chunks]
        seen |= {"merged" if row[7].startswith("duplicate") else row[4] for row in rows}
    assert seen >= {"placed", "truncated", "dropped", "merged"}  # the cases reach every path of a row
