"""A real base install (no extras) in a fresh virtual environment runs `edgewise pack`."""

import json
import subprocess
import sys
import venv

import pytest

from ..conftest import ROOT

pytestmark = pytest.mark.slow


def test_base_install_packs_without_any_extra(tmp_path):
    env_dir = tmp_path / "base-venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / ("Scripts" if sys.platform == "win32" else "bin")
    subprocess.run([bin_dir / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(ROOT)],
                   check=True, capture_output=True, timeout=600)
    chunks = tmp_path / "chunks.json"
    chunks.write_text(json.dumps(["Lyon is a city.", {"text": "Paris is the capital of France.", "id": "p"}]))
    out = subprocess.run([bin_dir / "edgewise", "pack", "-q", "capital?", "-c", str(chunks), "-b", "300", "-f", "json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)["debug_info"]
    assert (info["order"], info["tokenizer"], info["estimated"]) == (["chunk-0", "p"], "cl100k_base", False)
    # and the install really is the light core: no model or framework came with it
    probe = "import importlib.util as u; print([m for m in ('numpy', 'onnxruntime', 'torch', 'tokenizers', 'haystack') if u.find_spec(m)])"
    found = subprocess.run([bin_dir / "python", "-c", probe], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"
