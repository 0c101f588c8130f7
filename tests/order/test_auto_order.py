"""``order="auto"`` in ``pack()``: the model's measured position profile places the chunks, or
``edges`` does and the debug record says why.

The profiles are synthetic (``tests/position_profiles.py``) and live in temporary directories:
``$EDGEWISE_PROFILES`` and a user directory under a temporary ``$XDG_CONFIG_HOME``, so nothing on
the machine running the tests takes part.
"""

from __future__ import annotations

import pytest

import edgewise
from edgewise.order import profiles as profiles_module
from edgewise.order.profiles import SHIPPED, discover

from ..position_profiles import (
    CHUNKS,
    PLACED_BY_EDGES,
    PLACED_BY_LAST_BEST,
    QUERY,
    placement,
    profile,
    write_profile,
)


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    """``(EDGEWISE_PROFILES directory, user directory)``, both empty and both looked in."""
    env, config = tmp_path / "env", tmp_path / "config"
    env.mkdir()
    monkeypatch.setenv("EDGEWISE_PROFILES", str(env))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    return env, config / "edgewise" / "profiles"


def auto(**options):
    return edgewise.pack(QUERY, CHUNKS, model="gpt-4o", order="auto", layout="paper", **options)


def without_placement(packed):
    out = packed.debug_info.to_dict()
    del out["placement"]
    return out


def test_a_usable_profile_puts_the_best_chunk_where_the_model_reads_best(dirs):
    path = write_profile(dirs[0])
    packed = auto()
    assert packed.debug_info.order == PLACED_BY_LAST_BEST
    assert packed.debug_info.strategy == f"calibrated:{path}"
    assert packed.debug_info.to_dict()["placement"] == placement(path, "profile gpt-4o/qa-paper-4")
    # exactly the pack the profile's calibrated order gives, plus the record of the choice
    by_hand = edgewise.pack(QUERY, CHUNKS, model="gpt-4o", order=f"calibrated:{path}", layout="paper")
    assert (packed.prompt, without_placement(packed)) == (by_hand.prompt, by_hand.debug_info.to_dict())


def test_a_snapshot_name_finds_its_family_s_profile(dirs):
    path = write_profile(dirs[0])
    packed = edgewise.pack(QUERY, CHUNKS, model="gpt-4o-2024-08-06", order="auto", layout="paper")
    assert packed.debug_info.order == PLACED_BY_LAST_BEST
    assert packed.debug_info.to_dict()["placement"] == placement(path, "profile gpt-4o/qa-paper-4")


def test_a_profile_measured_with_another_layout_and_count_is_used_and_the_reason_says_so(dirs):
    path = write_profile(dirs[0])
    packed = edgewise.pack(QUERY, CHUNKS[:3], model="gpt-4o", order="auto", layout="layered")
    assert packed.debug_info.to_dict()["placement"] == placement(
        path, "profile gpt-4o/qa-paper-4 (measured with layout 'paper'; the model has none for 'layered'; "
              "measured at 4 documents, placed 3 chunks)")


def test_a_profile_within_its_noise_is_not_used(dirs):
    path = write_profile(dirs[0], profile(half=0.35))
    packed = auto()
    assert packed.debug_info.order == PLACED_BY_EDGES
    assert packed.debug_info.to_dict()["placement"] == placement(
        path, "profile gpt-4o/qa-paper-4: placement not used, its best place (3, 70% [35-100%]) and worst "
              "(1, 10% [0-45%]) overlap: the difference is within its noise; auto places by edges", order="edges")
    edges = edgewise.pack(QUERY, CHUNKS, model="gpt-4o", order="edges", layout="paper")
    assert (packed.prompt, without_placement(packed)) == (edges.prompt, edges.debug_info.to_dict())


def test_a_profile_within_its_noise_still_prunes_when_its_pruning_paid(dirs):
    path = write_profile(dirs[0], profile(half=0.35, prune=PAYS))
    packed = auto(prune_scorer="lexical")
    placed = packed.debug_info.to_dict()["placement"]
    assert placed == placement(
        path, "profile gpt-4o/qa-paper-4: placement not used, its best place (3, 70% [35-100%]) and worst "
              "(1, 10% [0-45%]) overlap: the difference is within its noise; auto places by edges", order="edges",
        prune=0.3, profile_prune=0.3)
    pruned = edgewise.pack(QUERY, CHUNKS, model="gpt-4o", order="edges", layout="paper", prune=0.3,
                           prune_scorer="lexical")
    assert (packed.prompt, without_placement(packed)) == (pruned.prompt, pruned.debug_info.to_dict())


def test_without_a_model_auto_is_edges_and_says_why(dirs):
    write_profile(dirs[0])
    packed = edgewise.pack(QUERY, CHUNKS, order="auto", layout="paper")
    assert packed.debug_info.to_dict()["placement"] == placement(
        None, "no model given (model=...): auto places by edges", order="edges")
    edges = edgewise.pack(QUERY, CHUNKS, order="edges", layout="paper")
    assert (packed.prompt, without_placement(packed)) == (edges.prompt, edges.debug_info.to_dict())


def test_a_model_without_a_profile_is_placed_by_edges_and_the_reason_names_the_directories(dirs):
    write_profile(dirs[0])  # gpt-4o's, not gpt-4.1's
    packed = edgewise.pack(QUERY, CHUNKS, model="gpt-4.1", order="auto", layout="paper")
    assert packed.debug_info.order == PLACED_BY_EDGES
    assert packed.debug_info.to_dict()["placement"] == placement(
        None, f"no profile for model 'gpt-4.1' (looked in {dirs[0]}, {dirs[1]}, {SHIPPED}): auto places by edges",
        order="edges")


def test_auto_without_a_model_is_edges_in_every_placing_function():
    items = list("abcdefg")
    assert edgewise.reorder(items, "auto") == edgewise.reorder(items, "edges") == ["a", "c", "e", "g", "f", "d", "b"]
    assert [edgewise.place("auto", n) for n in range(6)] == [edgewise.place("edges", n) for n in range(6)]


def test_any_other_order_leaves_no_placement_record(dirs):
    write_profile(dirs[0])
    assert "placement" not in edgewise.pack(QUERY, CHUNKS, model="gpt-4o", layout="paper").debug_info.to_dict()


PAYS = {"threshold": 0.3, "pays": True, "difference": 0.1, "p": 0.004}


def test_a_profile_that_measured_pruning_pays_prunes_when_the_caller_did_not_say(dirs):
    path = write_profile(dirs[0], profile(prune=PAYS))
    packed = auto(prune_scorer="lexical")
    assert packed.debug_info.to_dict()["placement"] == placement(
        path, "profile gpt-4o/qa-paper-4", prune=0.3, profile_prune=0.3)
    by_hand = edgewise.pack(QUERY, CHUNKS, model="gpt-4o", order=f"calibrated:{path}", layout="paper", prune=0.3,
                            prune_scorer="lexical")
    assert (packed.prompt, without_placement(packed)) == (by_hand.prompt, by_hand.debug_info.to_dict())
    assert [p["id"] for p in packed.debug_info.pruned] == ["a", "b", "c", "d"]


def test_the_caller_s_own_prune_wins_over_the_profile_s(dirs):
    path = write_profile(dirs[0], profile(prune=PAYS))
    packed = auto(prune=0.05, prune_scorer="lexical")
    assert packed.debug_info.to_dict()["placement"] == placement(
        path, "profile gpt-4o/qa-paper-4", prune=0.05, profile_prune=0.3)
    by_hand = edgewise.pack(QUERY, CHUNKS, model="gpt-4o", order=f"calibrated:{path}", layout="paper", prune=0.05,
                            prune_scorer="lexical")
    assert (packed.prompt, without_placement(packed)) == (by_hand.prompt, by_hand.debug_info.to_dict())
    assert [p["id"] for p in packed.debug_info.pruned] == ["a"]


def test_pruning_that_did_not_pay_is_not_applied(dirs):
    path = write_profile(dirs[0], profile(prune={**PAYS, "pays": False}))
    packed = auto(prune_scorer="lexical")
    assert packed.debug_info.to_dict()["placement"] == placement(path, "profile gpt-4o/qa-paper-4")
    assert packed.debug_info.pruned == []


def test_pruning_measured_with_another_layout_is_not_applied(dirs):
    path = write_profile(dirs[0], profile(prune=PAYS))  # measured with layout paper
    packed = edgewise.pack(QUERY, CHUNKS, model="gpt-4o", order="auto", layout="layered", prune_scorer="lexical")
    assert packed.debug_info.to_dict()["placement"] == placement(
        path, "profile gpt-4o/qa-paper-4 (measured with layout 'paper'; the model has none for 'layered'; "
              "its pruning (0.3) is for its own layout, not applied)")
    assert (packed.debug_info.order, packed.debug_info.pruned) == (PLACED_BY_LAST_BEST, [])


def test_an_unreadable_profile_file_is_skipped_and_reported(dirs):
    good = write_profile(dirs[0])
    broken = dirs[0] / "broken.json"
    broken.write_text("{not json")
    invalid = write_profile(dirs[0], profile(n_docs=0), name="invalid.json")
    packed = auto()
    assert packed.debug_info.order == PLACED_BY_LAST_BEST
    assert packed.debug_info.to_dict()["placement"] == placement(good, "profile gpt-4o/qa-paper-4")
    found = discover()
    assert [p.path for p in found.profiles if not p.path.startswith(str(SHIPPED))] == [str(good)]
    assert found.errors == (
        (str(broken), f"profile file '{broken}': is not valid JSON (JSONDecodeError: Expecting property name "
                      "enclosed in double quotes: line 1 column 2 (char 1))"),
        (str(invalid), f"profile file '{invalid}': n_docs must be an integer > 0, but got 0"),
    )


def test_the_environment_s_directory_shadows_the_user_s(dirs):
    env, user = dirs
    mine = write_profile(user, profile(accuracy=(0.7, 0.1, 0.15, 0.4)))  # best first: relevance order
    theirs = write_profile(env)  # the same name (gpt-4o/qa-paper-4), best last
    packed = auto()
    assert packed.debug_info.order == PLACED_BY_LAST_BEST
    assert packed.debug_info.to_dict()["placement"] == placement(theirs, "profile gpt-4o/qa-paper-4")
    found = discover()
    ours = [p.path for p in found.profiles if not p.path.startswith(str(SHIPPED))]
    assert (ours, found.origin[str(theirs)]) == ([str(theirs)], "EDGEWISE_PROFILES")
    theirs.unlink()  # without it, the user's profile places
    packed = auto()
    assert packed.debug_info.order == ["a", "d", "c", "b"]
    assert packed.debug_info.to_dict()["placement"] == placement(mine, "profile gpt-4o/qa-paper-4")


def test_a_shipped_profile_places_when_no_directory_has_one(dirs, tmp_path, monkeypatch):
    shipped = tmp_path / "shipped"
    monkeypatch.setattr(profiles_module, "SHIPPED", shipped)
    path = write_profile(shipped)
    packed = auto()
    assert packed.debug_info.order == PLACED_BY_LAST_BEST
    assert packed.debug_info.to_dict()["placement"] == placement(path, "profile gpt-4o/qa-paper-4")
    assert discover().origin == {str(path): "shipped"}


def test_the_profiles_shipped_in_the_package_are_readable_and_name_known_models():
    from edgewise.catalog import resolve_name

    found = discover([(SHIPPED, "shipped")])
    assert found.errors == ()
    assert [p.name for p in found.profiles if resolve_name(p.model) is None] == []
