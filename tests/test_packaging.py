"""The package builds as a release would: sdist and wheel with `python -m build`,
metadata accepted by `twine check`, the sdist carrying LICENSE, tests and examples.
Skips when build or twine is not installed (they are in the `test` extra)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("build") is None or importlib.util.find_spec("twine") is None,
    reason="build and twine are needed (pip install -e '.[test]')",
)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # --no-isolation: the build runs with the installed setuptools, offline
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_twine_check_passes(dist: Path) -> None:
    files = sorted(str(p) for p in dist.iterdir())
    assert any(f.endswith(".tar.gz") for f in files) and any(f.endswith(".whl") for f in files)
    done = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *files], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_sdist_carries_license_docs_tests_examples_and_action(dist: Path) -> None:
    sdist = next(dist.glob("*.tar.gz"))
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for wanted in ("LICENSE", "action.yml", "tests/test_packaging.py", "examples/stencil/perfcheck.toml",
                   "examples/ci/github-actions.yml", "perfcheck/report/schemas/results.schema.json",
                   "CONTRIBUTING.md", "examples/cpu/README.md",
                   *(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))):
        assert wanted in names, wanted
    assert not any("__pycache__" in n for n in names)


def test_wheel_metadata_declares_license_and_pytest_framework(dist: Path) -> None:
    wheel = next(dist.glob("*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = zf.read(meta_name).decode()
        names = zf.namelist()
    assert "Classifier: Framework :: Pytest" in meta
    assert "Classifier: License :: OSI Approved :: MIT License" in meta
    assert any(n.endswith("licenses/LICENSE") or n.endswith("/LICENSE") for n in names)
    assert "perfcheck/report/schemas/results.schema.json" in names
    assert "perfcheck/arch/data/mi100.toml" in names or any(n.startswith("perfcheck/arch/data/") for n in names)
    # what the citations [Sn] refer to ships with the data that cites them
    assert "perfcheck/arch/data/sources.toml" in names
