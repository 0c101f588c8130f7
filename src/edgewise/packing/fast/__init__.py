"""The fast paths of a pack, behind one seam: the same prompt and debug record as the plain path, sooner.

The plain path (:mod:`edgewise.packing.packer`: score → prune → select → place → render → settle
over a list of :class:`~edgewise.chunk.Chunk`) is the one to read and to change. A pack of 20,000
retrieved chunks of which 20 fit should not pay for 20,000 records, encodings or renders it only
reports as dropped; these paths make sure of that, each relying only on what a protocol declares:

- :mod:`.lazy`: plain input dicts checked a column at a time and ranked without a ``Chunk`` each
  (:class:`~.lazy.PlainRanked` builds one when a step reads it);
- :mod:`.skip`: runs of chunks that cannot go in, skipped on their words and titles without
  encoding them (the tokenizer's ``lower_bound``: :class:`~edgewise.tokens.tokenizers.Bounded`;
  the layout's ``tags_bound`` and ``tags_pricer``: :mod:`edgewise.layout.hooks`);
- :mod:`.counts`: each text counted once per pack, system texts and layout overheads once per
  process (:class:`~edgewise.tokens.tokenizers.ExactCounts`);
- the word-bound scan and the column read in C (``edgewise._scan``, with a Python twin each:
  :mod:`edgewise.compiled`).

:data:`ENABLED` switches them all off at once (``with plain_path():``); the tests pack generated
inputs both ways and require equal results (``tests/packing/test_plain_and_fast.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...layout import Layout, hooks
from ...tokens.tokenizers import Tokenizer
from .counts import PackCounts, pinned
from .lazy import has_summaries, ids, ids_scores, rank_plain
from .skip import Skipper

if TYPE_CHECKING:
    from ...chunk import Chunk

#: whether packs take the fast paths (the tests switch them off to compare)
ENABLED = True

__all__ = ["ENABLED", "FastPaths", "PackCounts", "counts_for", "has_summaries", "ids", "ids_scores", "plain_path",
           "rank_plain", "ranked_plain"]


@contextmanager
def plain_path() -> Iterator[None]:
    """Packs in this block take the plain path only (for tests and for reading a pack step by step)."""
    global ENABLED
    was, ENABLED = ENABLED, False
    try:
        yield
    finally:
        ENABLED = was


def counts_for(tok: Tokenizer) -> Tokenizer:
    """The tokenizer one pack counts with: with the fast paths, a memo over it (:class:`PackCounts`)."""
    return PackCounts(tok) if ENABLED else pinned(tok)


def ranked_plain(items: Any) -> tuple[Sequence[Chunk], dict[str, int], str] | None:
    """Plain dicts ranked lazily (see :func:`~.lazy.rank_plain`); None without the fast paths."""
    return rank_plain(items) if ENABLED else None


@dataclass(frozen=True)
class FastPaths:
    """What one pack's selection may use to skip work: the layout's exact price of a chunk's tags."""

    tags_cost: Callable[[str, str | None], int] | None

    @classmethod
    def of(cls, lay: Layout, tok: Tokenizer) -> FastPaths | None:
        """The fast paths for a pack in ``lay`` counted by ``tok``; None where they are switched off."""
        return cls(hooks.tags_cost(lay, tok)) if ENABLED else None

    def skipper(self, ranked: Sequence[Chunk], min_cut: int, bound: Callable[[str, int], int] | None,
                tags_bound: Callable[[str | None], int] | None,
                why: Callable[[int, int, int | None], str]) -> Skipper | None:
        """A :class:`~.skip.Skipper` for one walk over ``ranked`` (see
        :class:`edgewise.packing.select.Bounds` for the bounds); None without a text bound."""
        if bound is None:
            return None
        return Skipper(ranked, min_cut, bound, tags_bound, self.tags_cost, why)
