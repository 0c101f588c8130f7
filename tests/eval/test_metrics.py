"""The paper's metric on hand-written cases, kv exact match, and Wilson intervals."""

from __future__ import annotations

import pytest

from edgewise.errors import ConfigError
from edgewise.eval.metrics import best_subspan_em, first_line, get_metric, kv_exact, normalize_answer, wilson


def test_normalize_answer_follows_squad():
    assert [normalize_answer(s) for s in ["The Beatles", "  a  cat, an   owl! ", "U.S.A.", "Rock 'n' Roll", "THE end"]] == [
        "beatles", "cat owl", "usa", "rock n roll", "end"]


@pytest.mark.parametrize(
    ("prediction", "answers", "expected"),
    [
        ("Wilhelm Conrad Röntgen", ["Wilhelm Conrad Röntgen"], 1.0),  # exact
        ("It was wilhelm conrad röntgen.", ["Wilhelm Conrad Röntgen"], 1.0),  # case, punctuation, subspan
        ("The Eiffel Tower", ["Eiffel Tower"], 1.0),  # article in the prediction
        ("Eiffel Tower", ["the Eiffel tower"], 1.0),  # article in the answer
        ("St. Louis, Missouri", ["St Louis"], 1.0),  # punctuation inside the answer
        ("  \n Paris", ["Paris"], 1.0),  # leading blank lines are not the first line of text
        ("I am not sure.\nParis", ["Paris"], 0.0),  # the answer on a later line does not count
        ("London", ["Paris", "London"], 1.0),  # any of several answers
        ("Parisian food", ["Paris"], 1.0),  # substring, as in the paper (not token match)
        ("Lyon", ["Paris"], 0.0),
        ("", ["Paris"], 0.0),
        ("anything", ["", "the"], 0.0),  # an answer that normalises to nothing never matches
    ],
)
def test_best_subspan_em_matches_the_paper(prediction, answers, expected):
    assert best_subspan_em(prediction, answers) == expected


def test_first_line():
    assert [first_line(s) for s in ["a\nb", "\n\n  b c \nd", ""]] == ["a", "b c", ""]


@pytest.mark.parametrize(
    ("prediction", "expected"),
    [
        ("bb3ba2a5-7de8-434b-a86e-a88bb9fa7289", 1.0),
        (' "bb3ba2a5-7de8-434b-a86e-a88bb9fa7289",', 1.0),
        ("bb3ba2a5-7de8-434b-a86e-a88bb9fa7289.\nmore", 1.0),
        ("BB3BA2A5-7de8-434b-a86e-a88bb9fa7289", 0.0),  # exact, case-sensitive
        ("bb3ba2a5-7de8-434b-a86e-a88bb9fa728", 0.0),  # one character short
        ("The value is bb3ba2a5-7de8-434b-a86e-a88bb9fa7289", 0.0),
        ("\nbb3ba2a5-7de8-434b-a86e-a88bb9fa7289", 1.0),
    ],
)
def test_kv_exact(prediction, expected):
    assert kv_exact(prediction, ["bb3ba2a5-7de8-434b-a86e-a88bb9fa7289"]) == expected


def test_wilson_against_known_values():
    # textbook values of the Wilson score interval (50/100 -> 0.404-0.596)
    assert [round(x, 4) for x in wilson(6, 6)] == [0.6097, 1.0]
    assert [round(x, 4) for x in wilson(0, 6)] == [0.0, 0.3903]
    assert [round(x, 4) for x in wilson(50, 100)] == [0.4038, 0.5962]
    assert [round(x, 4) for x in wilson(1, 6)] == [0.0301, 0.5635]
    assert wilson(0, 0) == (0.0, 1.0)


def test_unknown_metric_lists_the_known_ones():
    with pytest.raises(ConfigError, match="unknown metric 'f1'; choose one of: best_subspan_em, kv_exact"):
        get_metric("f1")
