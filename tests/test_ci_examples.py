"""The CI examples and the CI reference (docs/ci.md) say what is true: perfcheck is
installed from its repository (no package index serves it yet), the GitHub example
uses the action, the GitLab example profiles on a GPU runner and checks on a CPU
runner, and this repository's CI runs the action on the stencil example."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BARE_INSTALL = re.compile(r"pip install\s+(-\S+\s+)*[\"']?perfcheck\b(?![./@\w-])")


def _texts() -> dict[str, str]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").rglob("*.yml")),
             *sorted((ROOT / "examples").rglob("*.md"))]
    return {str(p.relative_to(ROOT)): p.read_text() for p in files}


def test_nothing_installs_perfcheck_from_an_index() -> None:
    for name, text in _texts().items():
        assert not BARE_INSTALL.search(text), name
    assert BARE_INSTALL.search("run: pip install perfcheck")  # the pattern itself works
    assert not BARE_INSTALL.search('pip install "git+https://github.com/OWNER/perfcheck@REF"')


def test_github_example_uses_the_action() -> None:
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load((ROOT / "examples" / "ci" / "github-actions.yml").read_text())
    steps = [s for job in workflow["jobs"].values() for s in job["steps"]]
    action = next(s for s in steps if str(s.get("uses", "")).startswith("OWNER/perfcheck@"))
    assert {"config", "reports", "fail-on", "comment"} <= set(action["with"])
    assert workflow["permissions"]["pull-requests"] == "write"
    assert workflow["jobs"]["check"]["needs"] == "profile"


def test_gitlab_example_profiles_on_gpu_and_checks_on_cpu() -> None:
    yaml = pytest.importorskip("yaml")
    pipeline = yaml.safe_load((ROOT / "examples" / "ci" / "gitlab-ci.yml").read_text())
    template = yaml.safe_load((ROOT / "examples" / "ci" / "gitlab-perfcheck.yml").read_text())
    assert {"local": "examples/ci/gitlab-perfcheck.yml"} in pipeline["include"]
    assert "gpu" in pipeline["profile"]["tags"] and "profiles/" in pipeline["profile"]["artifacts"]["paths"]
    check = pipeline["kernel-performance"]
    assert check["extends"] == ".perfcheck" and check["needs"] == [{"job": "profile", "artifacts": True}]
    job = template[".perfcheck"]
    assert job["artifacts"]["reports"] == {"junit": "perf/junit.xml", "metrics": "perf/metrics.txt"}
    script = " ".join(job["script"])
    assert "--junit-flavour gitlab" in script and '"$PERFCHECK_GIT"' in script


def test_project_ci_runs_the_action_on_the_stencil_example() -> None:
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    steps = workflow["jobs"]["action"]["steps"]
    uses = [s for s in steps if s.get("uses") == "./"]
    assert len(uses) == 2 and all(s["with"]["config"] == "examples/stencil/perfcheck.toml" for s in uses)


def test_ci_reference_makes_no_false_claims() -> None:
    text = (ROOT / "docs" / "ci.md").read_text()
    assert "GitHub has no JUnit view of its own" in text
    assert "GitHub's test view" not in text and "GitHub's test-report" not in text
    for path in ("action.yml", "examples/ci/github-actions.yml", "examples/ci/gitlab-ci.yml", "examples/ci/gitlab-perfcheck.yml"):
        assert path in text or Path(path).name in text, path
        assert (ROOT / path).is_file(), path


def test_ci_texts_say_what_pip_and_gitlab_really_do() -> None:
    """pip fetches perfcheck's dependencies from an index (only perfcheck itself comes
    from its repository); GitLab's JUnit parser reads a test case's file, not its line
    (lib/gitlab/ci/parsers/test/junit.rb); metrics reports are a GitLab Premium feature."""
    texts = {**_texts(), "action.yml": (ROOT / "action.yml").read_text()}
    for name, text in texts.items():
        assert "no package index is needed" not in text.lower() and "(no package index needed)" not in text, name
    readme = " ".join(texts["docs/ci.md"].split())
    assert "`<testcase>`, as GitLab's test report reads them" not in readme
    assert "GitLab's test report reads `file` (it has no line)" in readme
    assert "`artifacts:reports:metrics` (a GitLab Premium feature" in readme
