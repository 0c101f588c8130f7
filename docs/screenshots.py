"""Regenerate the screenshot the docs show of the inspector page (``docs/guides/inspector.png``).

    python docs/screenshots.py

It starts ``edgewise serve`` on a free loopback port, opens ``/ui`` in headless Chromium (Debian's
``chromium`` and ``chromium-driver``; ``selenium`` comes with the ``dev`` extra), loads the bundled
example (``examples/query.txt``, ``examples/chunks.json``) as a user would, sets the budget to
1,200 tokens, waits for the page to show the pack, and saves the window. Nothing is fetched from
the network: the page and the server are local.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "guides" / "inspector.png"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1400,1700",
         "--hide-scrollbars")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(check, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"screenshots: {what} did not happen within {timeout:g} s")
        time.sleep(0.1)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def browser(profile: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    found = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not (found and driver):
        raise SystemExit("screenshots: needs Chromium and its driver: apt-get install chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = found
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(driver))


def shoot(url: str, out: Path) -> None:
    with tempfile.TemporaryDirectory() as profile:
        chrome = browser(profile)
        try:
            chrome.get(f"{url}/ui")
            state = lambda: chrome.execute_script("return [document.body.dataset.state, document.body.dataset.renders]")
            wait(lambda: state()[0] == "idle", "reading the server's capabilities")
            chrome.find_element("id", "query").send_keys((ROOT / "examples" / "query.txt").read_text().strip())
            chrome.find_element("id", "file").send_keys(str(ROOT / "examples" / "chunks.json"))
            wait(lambda: state() == ["ready", "1"], "the first pack")
            budget = chrome.find_element("id", "budget-value")
            budget.clear()
            budget.send_keys("1200")
            wait(lambda: state()[0] == "ready" and chrome.execute_script(
                "return document.querySelector('#stats dd[data-name=\"budget\"]').textContent") == "1200",
                "the pack at 1,200 tokens")
            chrome.save_screenshot(str(out))
        finally:
            chrome.quit()


def main() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "EDGEWISE_API_KEY": ""}
    server = subprocess.Popen([sys.executable, "-m", "edgewise.serve", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait(lambda: answers(f"{url}/healthz"), "the server's start")
        shoot(url, OUT)
    finally:
        server.terminate()
        server.wait(10)
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
