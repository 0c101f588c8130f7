"""A real browser for the page tests: headless Chromium driven by Selenium, and what the inspector
page must show for a debug record.

The browser is Debian's ``chromium`` with its ``chromedriver`` (``apt-get install chromium
chromium-driver``; ``make test`` installs them when it runs as root). Without them a test skips with
one line saying so, unless ``CI=true``: there it fails. Each browser starts with a fresh profile
and no network beyond what the page loads, and downloads go to a folder the test reads.

The expectations below are written from the debug record alone, apart from the page's script: the
rows as ``edgewise pack --table`` words them (plus the score and the pruning), the budget's parts,
and the chunk blocks of the prompt in prompt order, each linked to its row.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

INSTALL = "apt-get install chromium chromium-driver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1400,1000")
#: what the page shows, read in one call: the rows' cells, the budget legend, the marks of the
#: prompt, its text, the position curve's chunk dots, the state and the render count
READ_PAGE = """
const cells = (tr) => [...tr.querySelectorAll("td")].slice(0, 8).map((td) => td.textContent);
const q = (sel) => [...document.querySelectorAll(sel)];
return {
  state: document.body.dataset.state, renders: Number(document.body.dataset.renders),
  status: document.getElementById("status").textContent,
  rows: q("#rows tr").map(cells),
  texts: q("#rows .chunk-text").map((d) => d.textContent),
  kept: q("#rows tr").map((tr) => [...tr.querySelectorAll("mark.kept")].map((m) => m.textContent)),
  struck: q("#rows tr").map((tr) => [...tr.querySelectorAll("del.pruned")].map((m) => m.textContent)),
  budget: q("#budget-legend tbody tr").map((tr) => [tr.dataset.part, Number(tr.querySelector(".tokens").textContent)]),
  bar: q("#budget-bar .part").map((p) => p.dataset.part),
  chunks: q("#prompt a.chunk").map((a) => [a.dataset.id, a.dataset.section, a.getAttribute("href"),
                                           a.classList.contains("reminder")]),
  chunk_texts: q("#prompt a.chunk").map((a) => a.textContent),
  marks: q("#prompt .layer, #prompt .section-mark").map((s) => s.dataset.layer || s.dataset.section),
  prompt: document.getElementById("prompt").textContent,
  dots: q("#curve circle.chunk-dot").map((c) => [c.dataset.id, Number(c.dataset.slot), c.dataset.rank]),
  curve_points: q("#curve polyline").map((p) => p.getAttribute("points").split(" ").length),
  curve_note: document.getElementById("curve-note").textContent,
  exports: q("#exports a").map((a) => a.getAttribute("download")),
};
"""


def _binaries() -> tuple[str, str] | None:
    browser = next((found for name in ("chromium", "chromium-browser") if (found := shutil.which(name))), None)
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def _missing(what: str) -> None:
    message = f"the page tests need {what}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{message} (CI=true: not skipped)")
    pytest.skip(message)


@contextlib.contextmanager
def chromium(tmp: Path) -> Iterator[Any]:
    """A headless Chromium with a fresh profile in ``tmp`` (downloads in ``tmp / "downloads"``); always quit."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _missing("selenium: pip install -e '.[dev]'")
    found = _binaries()
    if found is None:
        _missing(f"Chromium and its driver: {INSTALL}")
    browser, driver = found
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (*FLAGS, f"--user-data-dir={tmp / 'profile'}"):
        options.add_argument(flag)
    downloads = tmp / "downloads"
    downloads.mkdir(exist_ok=True)
    options.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                              "download.prompt_for_download": False})
    chrome = webdriver.Chrome(options=options, service=Service(driver, log_output=str(tmp / "chromedriver.log")))
    try:
        chrome.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
        chrome.downloads = downloads
        yield chrome
    finally:
        chrome.quit()


def read_page(driver: Any) -> dict[str, Any]:
    return driver.execute_script(READ_PAGE)


def wait_for(driver: Any, ready: Any, what: str, timeout: float = 30) -> dict[str, Any]:
    """Read the page until ``ready(page)`` holds; fail with ``what`` and the page's status if it never does."""
    deadline = time.monotonic() + timeout
    while True:
        page = read_page(driver)
        if ready(page):
            return page
        if time.monotonic() > deadline:
            pytest.fail(f"the page never showed {what}: state {page['state']!r}, status {page['status']!r}")
        time.sleep(0.05)


def rendered_after(driver: Any, renders: int, timeout: float = 30) -> dict[str, Any]:
    """The page once it has rendered again after ``renders`` renders and settled (ready or error)."""
    return wait_for(driver, lambda p: p["renders"] > renders and p["state"] in ("ready", "error"),
                    f"a render after {renders}", timeout)


def download(driver: Any, link_id: str, timeout: float = 15) -> str:
    """Click the export link ``link_id`` and return the text of the file it downloads."""
    link = driver.find_element("id", link_id)
    name = link.get_attribute("download")
    target = driver.downloads / name
    if target.exists():
        target.unlink()
    link.click()
    deadline = time.monotonic() + timeout
    while not target.exists() or any(driver.downloads.glob("*.crdownload")):
        if time.monotonic() > deadline:
            pytest.fail(f"clicking #{link_id} did not download {name}")
        time.sleep(0.05)
    return target.read_text(encoding="utf-8")


# -- what the page must show for a debug record --------------------------------------------------


def expected_rows(debug: dict[str, Any]) -> list[list[str]]:
    """One row per input chunk: input index, id, rank (1 = best), score, outcome (with "pruned"
    when pruning cut it), where it went (``#position section``), tokens and the reason."""
    def outcome(r: dict[str, Any]) -> str:
        if "pruned" not in r:
            return r["outcome"]
        return "pruned" if r["outcome"] == "placed" else f"pruned, {r['outcome']}"

    return [[str(r["input_index"]), r["id"], "-" if r["rank"] is None else str(r["rank"] + 1),
             "-" if r["score"] is None else f"{r['score']:.3f}", outcome(r),
             "-" if r["position"] is None else f"#{r['position']} {r['section'] or ''}".strip(),
             "-" if r["tokens"] is None else str(r["tokens"]), r["reason"]] for r in debug["chunks"]]


def expected_budget(debug: dict[str, Any]) -> list[list[Any]]:
    """The budget's parts: the fixed prefix (``cache_prefix_tokens``), each section's chunk tokens,
    the rest of the prompt, and what is left of the budget (when there is one)."""
    used = max(debug["prompt_tokens"], debug["message_tokens"])
    sections = [[f"section {name}" if len(name) == 1 else name,
                 sum(r["tokens"] for r in debug["chunks"] if r["section"] == name and r["tokens"] is not None)]
                for name in debug["sections"]]
    rest = used - debug["cache_prefix_tokens"] - sum(n for _, n in sections)
    parts = [["system & fixed layers", debug["cache_prefix_tokens"]], *sections, ["question & structure", rest]]
    return parts + ([["left over", debug["remaining_tokens"]]] if debug["budget"] is not None else [])


def expected_chunk_marks(debug: dict[str, Any]) -> list[list[Any]]:
    """The chunk blocks of the prompt, in prompt order: id, section, the link to its row, and
    whether it is a reminder (the sections layout repeats key facts' summaries in C)."""
    row = {r["id"]: r["input_index"] for r in debug["chunks"] if r["merged_into"] is None}
    section = {cid: name for name, ids in debug["sections"].items() for cid in ids}
    return ([[cid, section[cid], f"#row-{row[cid]}", False] for cid in debug["order"]]
            + [[cid, "C", f"#row-{row[cid]}", True] for cid in debug["reminders"]])


def given_text(item: Any) -> str:
    return item if isinstance(item, str) else item["text"]
