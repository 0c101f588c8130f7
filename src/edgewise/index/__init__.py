"""Your own documents, indexed and answered: ``edgewise index`` and ``edgewise ask`` (extra ``index``).

- :func:`index_paths` reads ``.txt``/``.md``/``.html``/``.pdf`` files (:mod:`.readers`), splits them
  into token-aware chunks with overlap (:mod:`.chunking`), embeds them with the bundled MiniLM and
  stores text, metadata and vectors in LanceDB (:mod:`.lance`), incrementally.
- :func:`retrieve` fuses dense and BM25 retrieval (:mod:`.search`); :func:`ask` packs the hits
  within the model's context and gets the answer (:mod:`.answer`).

Nothing here is imported by ``import edgewise``; LanceDB, pyarrow, pypdf and BeautifulSoup load
only when a store is opened or a file of their kind is read.
"""

from __future__ import annotations

from .answer import Answer, ask, budget_for
from .build import Report, index_paths
from .lance import open_store
from .search import Hit, retrieve
from .store import Row, Settings, Store

__all__ = ["Answer", "Hit", "Report", "Row", "Settings", "Store", "ask", "budget_for", "index_paths", "open_store",
           "retrieve"]
