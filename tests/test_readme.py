"""The README leads: a short guide whose every command works as written.

"Your project in five steps" is copied out of the README and run, block by block,
in a new project in a temporary directory, with a real rocprofv3 kernel trace as
the profile (skips when ../shared is absent): the TOML block becomes the project's
pyproject.toml, each shell line runs as written (CI unset, as on a developer's
machine), and the CI snippets' commands run with CI=true, as on a runner. Only
their `pip install` lines are not run (no network here): they are checked to
install perfcheck from its repository."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, profile

README = ROOT / "README.md"
STEPS = "## Your project in five steps"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.M | re.S)
# a CI step's command: `- run: CMD` (GitHub) or a `script:` item `- CMD` (GitLab)
CI_COMMAND = re.compile(r"^\s*-\s+(?:run:\s+)?((?:pip|pytest|perfcheck)\s.*)$", re.M)


def _section(text: str, title: str) -> str:
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start:end if end >= 0 else None]


def _blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(_section(README.read_text(), STEPS))]


def test_readme_is_a_short_guide_that_links_its_reference() -> None:
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= 300, len(lines)
    # the first screen: what it is, the two commands, then the five steps
    assert text.index("pytest -q") < text.index(STEPS) < 40 * 80
    for target in re.findall(r"\]\(([^)#]+)\)", text):  # every link resolves
        assert (ROOT / target).exists(), target
    for doc in ("expectations", "formats", "history-reference", "ci", "run-mode", "api"):
        assert f"(docs/{doc}.md)" in text, doc
    assert "(CONTRIBUTING.md)" in text


def test_docs_links_resolve() -> None:
    for page in [*(ROOT / "docs").glob("*.md"), ROOT / "CONTRIBUTING.md", ROOT / "examples" / "cpu" / "README.md"]:
        for target in re.findall(r"\]\(([^)#:]+)\)", page.read_text()):
            assert (page.parent / target).exists(), (page, target)


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = README.read_text()
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci.startswith("python3 -m venv .venv && ") and f"    {ci}\n" in readme


def test_five_steps_have_the_blocks_they_promise() -> None:
    kinds = [kind for kind, _ in _blocks()]
    assert kinds == ["toml", "sh", "sh", "yaml", "yaml", "sh"], kinds


def _bash(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_five_steps_run_as_written(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    trace = profile("rocprofv3/rocprofiler-sdk-docs-2025/kernel_trace.csv")
    project = tmp_path / "myapp"
    (project / "profiles").mkdir(parents=True)
    shutil.copy(trace, project / "profiles" / "kernel_trace.csv")
    bin_dir = str(Path(sys.executable).parent)  # pytest and perfcheck of this environment
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PERFCHECK_", "GITHUB_", "CI_", "GIT_")) and k not in ("CI", "PYTEST_ADDOPTS")}
    env.update(PATH=bin_dir + os.pathsep + env.get("PATH", ""), GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org")
    assert _bash("git init -q", project, env).returncode == 0
    blocks = _blocks()

    (kind, toml), *rest = blocks
    (project / "pyproject.toml").write_text(toml)
    ran: list[str] = []
    for kind, body in rest:
        if kind == "sh":  # steps 2, 3 and 5, on a developer's machine
            commands = [line for line in body.splitlines() if line.strip() and not line.startswith("#")]
            ci = {}
        else:  # step 4: the CI jobs' commands, on a runner
            commands = CI_COMMAND.findall(body)
            ci = {"CI": "true"}
        for command in commands:
            if command.startswith("pip install"):
                assert '"git+https://github.com/OWNER/perfcheck@REF"' in command, command
                continue
            done = _bash(command, project, {**env, **ci})
            assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-3000:])
            ran.append(command)
            if command == "pytest --perf":  # the first run records, loudly
                assert "baseline recorded: app" in done.stdout + done.stderr
    assert len(ran) == 6, ran
    # what step 3 committed is what CI compared with, and the reports landed
    tracked = _bash("git ls-files", project, env).stdout.split()
    assert "baselines/app/mi300x_gfx942_rocprofv3.json" in tracked and "pyproject.toml" in tracked
    assert (project / "perf" / "junit.xml").is_file() and (project / "perf" / "summary.md").is_file()
    assert (project / "perf-history.sqlite").is_file()


def test_the_main_command_runs_as_written(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """The README's first command, past its install: the check (exit 1 on purpose) and
    the comparison that tells the story, run in a scratch directory."""
    import shlex

    line = next(l.strip() for l in README.read_text().splitlines() if l.startswith("    python3 -m venv") and "check" in l)
    commands = [shlex.split(part) for chunk in line.split("&&") for part in chunk.split(";")]
    perfcheck = [c[1:] for c in commands if c and c[0] == ".venv/bin/perfcheck"]
    assert [c[0] for c in perfcheck] == ["check", "compare"]
    monkeypatch.chdir(tmp_path)
    shutil.copytree(ROOT / "examples" / "stencil", tmp_path / "examples" / "stencil")
    monkeypatch.delenv("CI", raising=False)
    check, compare = (cli(*args) for args in perfcheck)
    assert check.code == 1, check.err  # the "before" suite fails, on purpose
    assert compare.code == 0, compare.err
    assert {"junit.xml", "summary.md", "compare.md"} <= {p.name for p in (tmp_path / "out").iterdir()}
    assert list((tmp_path / "out" / "compare").glob("*.png")) and list((tmp_path / "out" / "roofline").glob("*.png"))
    story = (tmp_path / "out" / "compare.md").read_text()
    assert "lds" in story and "vgpr" in story
