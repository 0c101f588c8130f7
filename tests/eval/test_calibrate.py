"""Calibration end to end: `edgewise eval calibrate` measures a model's position curve against a
backend, writes and installs a profile, and `order="auto"` then places by it.

The backend is a loopback OpenAI-compatible fake that reads only the LAST record of a key-value
prompt: it answers the asked key's value when that record is last, and "unknown" otherwise. That
is a model whose curve is known exactly (0% first, 0% in the middle, 100% last), so the whole
profile can be asserted.
"""

import json
import re

import pytest

import edgewise
from edgewise.cli import main
from edgewise.errors import ConfigError, InputError
from edgewise.eval.calibrate import calibrate, grid, prune_gain
from edgewise.order.profiles import Profile, choose, discover, install, load

from ..servers import FakeCompletions

RECORD = re.compile(r'"([0-9a-f-]{36})": "([0-9a-f-]{36})"')
ASKED = re.compile(r'Key: "([0-9a-f-]{36})"')


def last_record(prompt: str) -> str:
    """What a model that reads only the last record says: the asked key's value if its record is last."""
    records = RECORD.findall(prompt)
    asked = ASKED.search(prompt).group(1)
    return records[-1][1] if records and records[-1][0] == asked else "unknown"


@pytest.fixture()
def llm():
    server = FakeCompletions(last_record)
    yield server
    server.close()


def _calibrate(run_dir, url, *extra):
    return ["eval", "calibrate", str(run_dir), "--task", "kv", "--pairs", "6", "--examples", "20", "--backend", "openai",
            "--base-url", url, "--model", "gpt-4o", "--concurrency", "2", "--quiet", *extra]


def test_calibrate_measures_installs_and_auto_places_by_it(tmp_path, llm, monkeypatch, capsys):
    profiles = tmp_path / "profiles"
    assert main(_calibrate(tmp_path / "run", llm.url, "--install", "--profile-dir", str(profiles))) == 0
    assert llm.prompts == 60  # 20 examples x first, middle, last
    assert capsys.readouterr().err == f"installed {profiles / 'gpt-4o--kv-kv-6.json'}\n"
    prof = json.loads((profiles / "gpt-4o--kv-kv-6.json").read_text())
    examples = prof["rows"]["examples"]
    assert len(examples) == 20 and all(e.startswith("kv6-") for e in examples)
    assert {k: v for k, v in prof.items() if k not in ("rows", "source")} == {
        "format": "edgewise-profile/1", "model": "gpt-4o", "task": "kv", "layout": "kv", "n_docs": 6,
        "accuracy": [0.0, 0.0, 0.0, 0.333333, 0.666667, 1.0],
        "measured": [
            {"relative_position": 0.0, "position": 0, "n": 20, "accuracy": 0.0, "interval": [0.0, pytest.approx(0.1611, abs=1e-4)]},
            {"relative_position": 0.4, "position": 2, "n": 20, "accuracy": 0.0, "interval": [0.0, pytest.approx(0.1611, abs=1e-4)]},
            {"relative_position": 1.0, "position": 5, "n": 20, "accuracy": 1.0, "interval": [pytest.approx(0.8389, abs=1e-4), 1.0]},
        ],
        "prune": None, "condition": "baseline",
    }
    assert prof["rows"]["task_params"] == {"examples": 20, "pairs": 6, "generate": False, "seed": 0}

    # a second run of the same command resumes: nothing is asked again
    assert main(_calibrate(tmp_path / "run", llm.url, "-o", str(tmp_path / "again.json"))) == 0
    assert llm.prompts == 60
    assert json.loads((tmp_path / "again.json").read_text())["accuracy"] == prof["accuracy"]

    monkeypatch.setenv("EDGEWISE_PROFILES", str(profiles))
    chunks = [{"id": f"c{i}", "text": f"fact {i}", "score": 10 - i} for i in range(6)]
    packed = edgewise.pack("q", chunks, model="gpt-4o", order="auto", layout="kv")
    path = str(profiles / "gpt-4o--kv-kv-6.json")
    # ranks by descending measured accuracy: the last slot, then the ones before it, ties to the earlier slot
    assert packed.debug_info.order == ["c3", "c4", "c5", "c2", "c1", "c0"]
    assert packed.debug_info.strategy == f"calibrated:{path}"
    assert packed.debug_info.to_dict()["placement"] == {
        "requested": "auto", "order": f"calibrated:{path}", "reason": "profile gpt-4o/kv-kv-6", "prune": None,
        "profile_prune": None,
        "profile": {"name": "gpt-4o/kv-kv-6", "path": path, "model": "gpt-4o", "task": "kv", "layout": "kv", "n_docs": 6},
    }


def _profile(accuracies, n=100, **fields):
    from edgewise.eval.metrics import wilson

    k = len(accuracies)
    measured = [{"relative_position": i / max(k - 1, 1), "position": i, "n": n, "accuracy": round(a * n) / n,
                 "interval": list(wilson(round(a * n), n))} for i, a in enumerate(accuracies)]
    base = {"model": "gpt-4o", "task": "qa", "layout": "paper", "n_docs": k, "accuracy": accuracies, "measured": measured}
    return Profile.from_dict({**base, **fields})


def test_noise_rule_uses_the_measured_intervals():
    assert _profile([0.2, 0.07, 0.3]).noise() is None
    assert _profile([0.2, 0.07, 0.3], n=40).noise() == (
        "its best place (2, 30% [18-45%]) and worst (1, 8% [3-20%]) overlap: the difference is within its noise")
    assert _profile([0.5]).noise() == "it has 1 measured place(s); a profile needs at least 2"


def test_choose_prefers_the_layout_then_qa_then_the_nearest_document_count(tmp_path):
    for prof in (_profile([0.2, 0.05, 0.4]), _profile([0.2, 0.05, 0.4], layout="sections", n_docs=20),
                 _profile([0.2, 0.05, 0.4], task="kv", n_docs=20), _profile([0.2, 0.05, 0.4], n_docs=30)):
        install(prof, tmp_path)
    found = discover([(tmp_path, "test")])
    assert [p.name for p in found.profiles] == ["gpt-4o/kv-paper-20", "gpt-4o/qa-paper-3", "gpt-4o/qa-paper-30",
                                               "gpt-4o/qa-sections-20"]
    assert choose("gpt-4o-2024-08-06", "paper", 20, found=found).profile.name == "gpt-4o/qa-paper-30"
    assert choose("gpt-4o", "paper", 5, found=found).profile.name == "gpt-4o/qa-paper-3"
    assert choose("gpt-4o", "sections", 5, found=found).profile.name == "gpt-4o/qa-sections-20"
    other = choose("gpt-4o", "layered", 3, found=found)
    assert (other.order, other.reason) == (
        f"calibrated:{tmp_path / 'gpt-4o--qa-paper-3.json'}",
        "profile gpt-4o/qa-paper-3 (measured with layout 'paper'; the model has none for 'layered')")
    none = choose("gpt-4.1", "paper", 3, found=found)
    assert (none.order, none.profile) == ("edges", None)
    assert none.reason.startswith("no profile for model 'gpt-4.1' (looked in ")


def test_a_profile_that_measured_pruning_pays_gives_its_threshold():
    pays = {"threshold": 0.3, "pays": True, "difference": 0.1, "p": 0.004}
    assert _profile([0.2, 0.05, 0.4], prune=pays).prune_threshold() == 0.3
    assert _profile([0.2, 0.05, 0.4], prune={**pays, "pays": False}).prune_threshold() is None
    assert _profile([0.2, 0.05, 0.4]).prune_threshold() is None


def test_bad_profiles_name_the_field_the_rule_and_the_value(tmp_path):
    with pytest.raises(ConfigError, match=r"profile: n_docs must be an integer > 0, but got 0"):
        Profile.from_dict({"model": "m", "task": "qa", "layout": "paper", "n_docs": 0, "accuracy": [1]})
    with pytest.raises(ConfigError, match=r"profile: format must be 'edgewise-profile/1', but got 'v9'"):
        Profile.from_dict({"format": "v9"})
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match=rf"profile file '{bad}': is not valid JSON"):
        load(bad)
    good = install(_profile([0.2, 0.05, 0.4]), tmp_path)
    found = discover([(tmp_path, "test")])
    assert [p.path for p in found.profiles] == [str(good)]
    assert [path for path, _ in found.errors] == [str(bad)]


def test_prune_gain_picks_the_threshold_that_pays():
    rows = []
    for e in range(30):
        for p in (0, 1, 2):
            rows.append({"condition": "baseline", "example": e, "position": p, "correct": float(e < 3), "model": "m",
                         "prompt_tokens": 1000})
            rows.append({"condition": "edgewise:order=edges,prune=0.05,prune_scorer=dense,rescore=True,scorer=dense",
                         "example": e, "position": p, "correct": float(e < 4), "model": "m", "prompt_tokens": 600})
            rows.append({"condition": "edgewise:order=edges,prune=0.3,prune_scorer=dense,rescore=True,scorer=dense",
                         "example": e, "position": p, "correct": float(e < 12), "model": "m", "prompt_tokens": 400})
    gain = prune_gain(rows)
    assert {k: v for k, v in gain.items() if k != "tried"} == {
        "threshold": 0.3, "condition": "edgewise:order=edges,prune=0.3,prune_scorer=dense,rescore=True,scorer=dense",
        "pairs": 90, "only_against": 0, "only_condition": 27, "difference": 0.3, "p": pytest.approx(0.0, abs=1e-6),
        "tokens_saved": 0.6, "pays": True, "alpha": 0.05}
    assert [(t["threshold"], t["pays"], t["only_condition"]) for t in gain["tried"]] == [(0.05, False, 3), (0.3, True, 27)]
    assert prune_gain([r for r in rows if r["condition"] == "baseline"]) is None


def test_grid_and_bad_calibration_input(tmp_path, llm):
    assert grid((0.05, 0.3)) == [
        "baseline", "edgewise:order=edges,scorer=dense,rescore=true,prune=0.05,prune_scorer=dense",
        "edgewise:order=edges,scorer=dense,rescore=true,prune=0.3,prune_scorer=dense"]
    from edgewise.eval.backends import get_backend
    from edgewise.eval.calibrate import measure

    backend = get_backend("openai", base_url=llm.url, model="gpt-4o")
    with pytest.raises(InputError, match=r"calibration measures task qa, kv or custom, but got 'needle'"):
        measure(tmp_path, backend, task="needle")
    with pytest.raises(InputError, match=r"each prune threshold must be in \[0, 1\], but got 1.5"):
        measure(tmp_path, backend, task="kv", pairs=6, prune=(1.5,))
    with pytest.raises(InputError, match=r"offset applies to task qa, but got task 'kv' with offset 3"):
        measure(tmp_path, backend, task="kv", pairs=6, offset=3)
    assert llm.prompts == 0
    with pytest.raises(InputError, match=r"run directory '.*nope' does not exist"):
        calibrate(tmp_path / "nope")


def test_calibrate_measures_your_own_rows(tmp_path, llm, capsys):
    from edgewise.eval.tasks import build_task

    kv = build_task("kv", examples=20, pairs=6)
    rows = tmp_path / "mine.jsonl"
    rows.write_text("".join(json.dumps({"question": ex.question, "answers": ex.answers, "chunks": ex.chunks,
                                        "key_id": ex.key_id}) + "\n" for ex in kv.examples))
    args = ["eval", "calibrate", str(tmp_path / "run"), "--task", "custom", "--data", str(rows), "--task-layout", "kv",
            "--metric", "kv_exact", "--examples", "20", "--backend", "openai", "--base-url", llm.url, "--model", "gpt-4o",
            "--quiet", "-o", "-"]
    assert main(args) == 0
    prof = json.loads(capsys.readouterr().out)
    assert llm.prompts == 60
    assert ({k: prof[k] for k in ("model", "task", "layout", "n_docs")}, [m["accuracy"] for m in prof["measured"]]) == (
        {"model": "gpt-4o", "task": "custom", "layout": "kv", "n_docs": 6}, [0.0, 0.0, 1.0])
    assert prof["rows"]["task_params"] == {"data": str(rows), "examples": 20, "metric": "kv_exact"}
