"""Scoring a model's answer, and accuracy with honest error bars.

``best_subspan_em`` is the metric of "Lost in the Middle" (Liu et al., 2023): only the first line of
the prediction counts; after SQuAD normalisation (lower case, no punctuation, no articles a/an/the,
single spaces) the prediction is correct if any normalised gold answer occurs inside it.
``kv_exact`` is exact match of the first line against the value, ignoring surrounding white space,
quotes and trailing punctuation (models often write ``"value",``).

>>> best_subspan_em("The Eiffel Tower, in Paris.", ["eiffel tower"])
1.0
>>> best_subspan_em("I think\\nParis", ["Paris"])
0.0
>>> kv_exact('"9f4a92b9-5f69",', "9f4a92b9-5f69")
1.0
>>> [round(x, 3) for x in wilson(6, 6)]
[0.61, 1.0]
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable, Sequence

from ..registry import Registry

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, drop punctuation and the articles a/an/the, single spaces.

    >>> normalize_answer("  The  Beatles' (band)! ")
    'beatles band'
    """
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def first_line(prediction: str) -> str:
    """The first line of the prediction (leading white space skipped), as the paper scores it."""
    return prediction.strip().split("\n")[0].strip()


def best_subspan_em(prediction: str, answers: Sequence[str]) -> float:
    """1.0 if any normalised answer is a substring of the normalised first line, else 0.0."""
    pred = normalize_answer(first_line(prediction))
    for answer in answers:
        gold = normalize_answer(answer)
        if gold and gold in pred:
            return 1.0
    return 0.0


def kv_exact(prediction: str, value: str | Sequence[str]) -> float:
    """1.0 if the first line, stripped of quotes and trailing ``,.;}``, equals the value."""
    values = [value] if isinstance(value, str) else list(value)
    pred = first_line(prediction).strip().rstrip(",.;}").strip().strip("\"'`").strip()
    return 1.0 if any(pred == v.strip() for v in values) else 0.0


Metric = Callable[[str, Sequence[str]], float]
METRICS: Registry[Metric] = Registry("metrics")  # plugins: entry-point group "edgewise.metrics"
METRICS.register("best_subspan_em", best_subspan_em)
METRICS.register("kv_exact", kv_exact)


def get_metric(name: str) -> Metric:
    """A metric by name: ``best_subspan_em``, ``kv_exact`` or a plugin's."""
    return METRICS.get(name)


def wilson(correct: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for ``correct`` successes in ``n`` trials (95% by default).

    >>> [round(x, 3) for x in wilson(1, 6)]
    [0.03, 0.564]
    >>> wilson(0, 0)
    (0.0, 1.0)
    """
    if n <= 0:
        return (0.0, 1.0)
    p = correct / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs of a paired comparison.

    ``only_a`` pairs were right under A and wrong under B, ``only_b`` the reverse; under the null
    hypothesis (no difference) each discordant pair is a fair coin, so the p-value is a two-sided
    binomial tail. Concordant pairs carry no information about the difference.

    >>> mcnemar_exact(0, 0)
    1.0
    >>> round(mcnemar_exact(1, 9), 4)  # 1 vs 9 discordant pairs
    0.0215
    >>> mcnemar_exact(5, 5)
    1.0
    """
    if only_a < 0 or only_b < 0:
        raise ValueError(f"discordant pair counts must be >= 0, but got {only_a} and {only_b}")
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2**n
    return min(1.0, 2 * tail)
