"""The documentation site: it builds strictly and offline, its API reference shows the docstrings,
and every code block of its pages runs as shown.

The pages' blocks follow README.md's conventions (tests/docs/test_readme.py): ``console`` blocks are
``$ `` commands and what they print, ``python`` blocks run in this process with a ``text output``
block after them for what they print, and shown output may skip lines with ``...``. A console
command ending in `` &`` starts a server in the background: it must answer ``/healthz`` (or, an
OpenAI-compatible LLM server, ``/v1/models``) before the
next command runs, and it is stopped when the block ends. Every block runs in a scratch folder laid
out like a checkout, with a free port in place of the pages' 8000. Console blocks (a process per
command) and blocks that load a model or start a pool are in ``make test``, not in the fast tier.
"""

from __future__ import annotations

import contextlib
import html
import importlib.util
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..conftest import ROOT
from ..servers import stop
from .test_readme import Block, assert_output, needs, parse_blocks, parse_console, run_shell

DOCS = ROOT / "docs"
PAGES = ["index.md", "install.md", *sorted(p.relative_to(DOCS).as_posix() for p in (DOCS / "guides").glob("*.md"))]
KINDS = ("console", "python", "text output")
# Commands a page shows that cannot run in its scratch folder, and what checks them instead.
ALLOWED = {"mkdocs build --strict --site-dir site": "the scratch folder has no mkdocs.yml: the site fixture runs "
                                                    "this build, into a temporary folder"}
# What a page's block needs beyond README.md's list (tests/docs/test_readme.py NEEDS): (words, marker, modules, extra).
MORE_NEEDS = [
    ("edgewise serve", None, ("fastapi", "uvicorn"), "serve"),
    ("--engine ray", "slow", ("ray",), "ray"),
    ("edgewise retrieve", "models", ("lancedb", "onnxruntime"), "index"),
    ("eval run", "slow", ("llama_cpp",), "eval"),
    ("eval calibrate", "slow", ("llama_cpp",), "eval"),
    ("llama_cpp.server", "slow", ("llama_cpp",), "eval"),
    ('model="gemma-3-270m"', "slow", ("llama_cpp",), "eval"),  # counted with Gemma's own vocabulary
    ("index_paths", "models", ("lancedb", "onnxruntime"), "index"),
    ("edgewise.batch", "slow", ("pyarrow",), "ray"),  # a process pool: seconds
]


def page_blocks(page: str) -> list[Block]:
    return parse_blocks((DOCS / page).read_text(encoding="utf-8"))


def block_needs(block: Block) -> list[tuple[str | None, tuple[str, ...], str]]:
    more = [(marker, modules, extra) for words, marker, modules, extra in MORE_NEEDS if words in block.body]
    return needs(block) + more


def _param(page: str, block: Block):
    # a console block starts a process per command (a second or more each): make test runs them, the fast tier does not
    slow = ["slow"] if block.kind == "console" else []
    marks = [getattr(pytest.mark, m) for m in dict.fromkeys(slow + [m for m, _, _ in block_needs(block) if m])]
    return pytest.param(page, block, id=f"{page}:{block.line}-{block.kind}", marks=marks)


RUNNABLE = [_param(page, b) for page in PAGES for b in page_blocks(page) if b.kind in ("console", "python")]


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def checkout(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "tests" / "data").symlink_to(ROOT / "tests" / "data")
    return tmp_path


@contextlib.contextmanager
def background(command: str, cwd: Path, port: int):
    """``command`` (a server) running until the block ends; it must answer ``/healthz`` (an LLM
    server: ``/v1/models``) within 60 s."""
    import httpx

    log = cwd / f"background-{port}.log"
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               EDGEWISE_API_KEY="")
    with open(log, "wb") as out:
        proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.TransportError):  # edgewise serve's /healthz, an LLM server's /v1/models
                if any(httpx.get(f"http://127.0.0.1:{port}{path}", timeout=2).status_code == 200
                       for path in ("/healthz", "/v1/models")):
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"`{command}` did not answer /healthz or /v1/models within 60 s:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
        yield
    finally:
        stop(proc)


def run_console(block: Block, where: str, cwd: Path) -> None:
    port = str(free_port())
    with contextlib.ExitStack() as servers:
        for command in parse_console(block.body):
            script = command.text.replace("8000", port)
            what = f"{where}: `{command.key}`"
            if command.key.startswith("pip install ") or command.key in ALLOWED:
                assert command.expected == [], f"{what}: output of a command the test does not run"
                continue  # pip: test_every_pip_install_names_real_extras
            if script.rstrip().endswith("&"):
                assert command.expected == [], f"{what}: a background command shows no output"
                servers.enter_context(background(script.rstrip().rstrip("&"), cwd, int(port)))
                continue
            out = run_shell(script, cwd, timeout=600)
            error = any(line.startswith("edgewise: error:") for line in command.expected)
            assert out.returncode == (2 if error else 0), f"{what} exited {out.returncode}:\n{out.stdout}"
            if command.expected:
                assert_output(command.expected, out.stdout, what)


# ------------------------------------------------------------------------------------------ tests


@pytest.mark.parametrize("page", PAGES)
def test_every_block_is_a_kind_this_test_runs(page):
    blocks = page_blocks(page)
    assert [(b.line, b.kind) for b in blocks if b.kind not in KINDS] == []
    orphans = [b.line for b in blocks if b.kind == "text output" and all(p.output is not b for p in blocks)]
    assert orphans == [], f"{page}: a `text output` block must follow the python block that prints it"


def test_every_guide_is_in_the_site():
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]

    def pages(entry):
        if isinstance(entry, str):
            return [entry]
        if isinstance(entry, list):
            return [p for e in entry for p in pages(e)]
        return [p for v in entry.values() for p in pages(v)]

    listed = pages(nav)
    on_disk = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.glob("**/*.md")
                     if p.relative_to(DOCS).parts[0] not in ("bench", "eval"))
    assert sorted(listed) == on_disk


def test_the_reference_holds_every_public_name():
    """Each name of ``edgewise.__all__`` has its entry, by its public path, on the reference's first page."""
    import edgewise

    shown = re.findall(r"^::: edgewise\.(\w+)$", (DOCS / "reference" / "api.md").read_text(encoding="utf-8"), re.M)
    assert sorted(shown) == sorted(edgewise.__all__)


def test_every_pip_install_names_real_extras():
    """The pages install from a checkout or the git URL (edgewise is not on PyPI), with extras that
    exist; the install page's table has a row for every extra."""
    import tomllib

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"])
    installs = [m for page in PAGES for m in re.findall(r"pip install ([^`\n#]+)", (DOCS / page).read_text(encoding="utf-8"))]
    assert installs
    for args in installs:
        spec = shlex.split(args)[-1]
        assert spec == "." or spec.startswith(".[") or re.fullmatch(r"edgewise(\[[^\]]*\])? @ git\+\S+", spec), args
        named = re.search(r"\[([^\]]*)\]", spec)
        assert set(named.group(1).split(",") if named else []) <= extras, args
    table = re.findall(r"^\| ((?:`[a-z]+`(?:, )?)+)", (DOCS / "install.md").read_text(encoding="utf-8"), re.M)
    rows = {name for cell in table for name in re.findall(r"`([a-z]+)`", cell)}
    assert rows == extras - {"integrations"}  # its row is haystack's, langchain's and llamaindex's


@pytest.mark.parametrize(("page", "block"), RUNNABLE)
def test_page_block_runs_as_shown(page: str, block: Block, checkout: Path, monkeypatch):
    for _, modules, extra in block_needs(block):
        missing = [m for m in modules if importlib.util.find_spec(m) is None]
        if missing:
            pytest.skip(f"docs/{page} line {block.line} needs {', '.join(missing)}: pip install -e '.[{extra}]'")
    where = f"docs/{page} line {block.line}"
    if block.kind == "console":
        run_console(block, where, checkout)
        return
    monkeypatch.chdir(checkout)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block.body, f"<{where}>", "exec"), {"__name__": "__docs__"})
    if block.output:
        assert_output(block.output.body.splitlines(), printed.getvalue(), where)


def article(path: Path) -> str:
    """The HTML of a built page's article."""
    page = path.read_text(encoding="utf-8")
    return page[page.index("<article"): page.index("</article>")]


def rendered_text(path: Path) -> str:
    """The text of a built page's article, tags dropped and white space collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", article(path))).split())


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """``mkdocs build --strict`` into a scratch folder, offline: no proxy, and no network needed."""
    pytest.importorskip("mkdocs", reason="the site needs the docs extra: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(NO_MKDOCS_2_WARNING="1", PYTHONPATH=str(ROOT / "src"))
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or "mkdocs"
    done = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(out)], cwd=ROOT, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    assert done.returncode == 0, done.stdout
    assert not [line for line in done.stdout.splitlines() if line.startswith("WARNING")], done.stdout
    return out


@pytest.mark.slow
def test_the_site_builds_strictly_with_every_page(site):
    built = sorted(p.relative_to(site).parent.as_posix() for p in site.glob("**/index.html")
                   if p.relative_to(site).parts[0] not in ("assets", "search"))
    pages = sorted("." if p == "index.md" else p[:-3] for p in (
        p.relative_to(DOCS).as_posix() for p in DOCS.glob("**/*.md") if p.relative_to(DOCS).parts[0] not in ("bench", "eval")))
    assert built == pages
    fetched = {m for p in site.glob("**/*.html") for m in re.findall(
        r'<(?:script|link|img)\b[^>]*\b(?:src|href)="(https?://[^"]+)"', p.read_text(encoding="utf-8"))}
    assert fetched == set(), "the site must read offline: no web fonts, scripts or images from the network"


@pytest.mark.slow
@pytest.mark.parametrize(("page", "phrases"), [
    ("reference/api", ["edgewise.pack", "Pack chunks for query into at most budget tokens of prompt.",
                       "edgewise.Packer", "edgewise.PackOptions", "edgewise.EdgewiseError",
                       "summary_tokens --summary-tokens integer ≥ 1 60 cap of an automatic summary"]),
    ("reference/orders", ["edgewise.order", "ORDERS", "register_order"]),
    ("reference/integrations", ["edgewise.integrations.haystack.EdgewiseRanker",
                                "edgewise.integrations.langchain.EdgewiseReorder",
                                "edgewise.integrations.llamaindex.EdgewisePacker"]),
    ("reference/eval", ["edgewise.eval.runner", "edgewise.eval.report"]),
    ("reference/llm", ["edgewise.llm.local", "edgewise.llm.openai", "reply_byte_limit"]),
])
def test_the_reference_shows_the_docstrings(site, page, phrases):
    text = rendered_text(site / page / "index.html")
    assert [p for p in phrases if p not in text] == [], text[:2000]
    assert ">>>" in text and "<blockquote" not in article(site / page / "index.html")  # doctests as code, not quotes
