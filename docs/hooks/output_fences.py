"""An MkDocs hook: a page's ``text output`` blocks are shown as code titled "Output".

The pages mark what a ``python`` block prints with a fence whose info string is ``text output``
(tests/docs/test_docs_site.py, like tests/docs/test_readme.py for README.md, runs the block and compares);
Markdown takes only one word there, so this hook, listed in ``mkdocs.yml``, rewrites the fence
before the page is rendered.
"""

from __future__ import annotations

import re
from typing import Any

OUTPUT_FENCE = re.compile(r"^```text output[ \t]*$", re.M)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:  # noqa: ARG001
    return OUTPUT_FENCE.sub('```text title="Output"', markdown)
