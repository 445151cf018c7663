"""History on ephemeral CI runners: the nightly recipes of examples/ci run as the
runners would run them, twice in a row on fresh workspaces, with the cache between
the runs emulated as GitHub's and GitLab's caches behave; the second run must see
the first one's history. Pull-request jobs read the store and append nothing.

GitHub (actions/cache): an entry's key cannot be overwritten; restore takes the exact
key, else the newest entry whose key starts with one of ``restore-keys``. GitLab
(``cache:``): one entry per key, pulled before the script and pushed after it
(``policy: pull-push``; ``pull`` never pushes)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfcheck.history import open_store
from tests.test_github import _action_inputs, _action_steps, _run_step

ROOT = Path(__file__).resolve().parent.parent
STENCIL = ROOT / "examples" / "stencil"
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is needed")


def _yaml(name: str) -> dict:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((ROOT / "examples" / "ci" / name).read_text())


def _workspace(root: Path) -> Path:
    """A fresh checkout: the project (here the stencil example) with its profiles."""
    shutil.copytree(STENCIL, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _runner_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PERFCHECK_", "CI_"))}
    env.update({"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "CI": "true"})
    env.update(extra)
    return env


class ActionsCache:
    """actions/cache/restore and actions/cache/save, as GitHub keeps the entries."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.entries: list[str] = []  # keys, oldest first

    @staticmethod
    def expand(text: str, run_id: int) -> str:
        return text.replace("${{ github.run_id }}", str(run_id)).replace("${{ github.run_attempt }}", "1")

    def restore(self, step: dict, run_id: int, work: Path) -> str | None:
        key = self.expand(step["with"]["key"], run_id)
        prefixes = [p for p in str(step["with"].get("restore-keys", "")).splitlines() if p.strip()]
        hit = key if key in self.entries else next(
            (k for k in reversed(self.entries) if any(k.startswith(p.strip()) for p in prefixes)), None)
        if hit is not None:
            shutil.copy(self.root / hit, work / step["with"]["path"])
        return hit

    def save(self, step: dict, run_id: int, work: Path) -> None:
        key = self.expand(step["with"]["key"], run_id)
        assert key not in self.entries, "a cache key is saved once: a second save of it would be refused"
        source = work / step["with"]["path"]
        if source.exists():
            self.root.mkdir(exist_ok=True)
            shutil.copy(source, self.root / key)
            self.entries.append(key)


def _named(steps: list[dict], prefix: str) -> dict:
    return next(s for s in steps if str(s.get("name", "")).startswith(prefix) or s.get("id") == prefix)


def _github_run(job: dict, cache: ActionsCache, run_id: int, tmp: Path, event: str) -> tuple[Path, dict[str, str]]:
    """One run of a job of the example workflow on a fresh runner: cache restore, the
    action's check step with the job's inputs, the job's own shell steps, cache save."""
    work = _workspace(tmp / f"run-{run_id}")
    steps = job["steps"]
    output, summary = tmp / f"output-{run_id}", tmp / f"summary-{run_id}"
    env = _runner_env(tmp, GITHUB_ACTIONS="true", GITHUB_OUTPUT=str(output), GITHUB_STEP_SUMMARY=str(summary),
                      GITHUB_EVENT_NAME=event)
    restore = next(s for s in steps if str(s.get("uses", "")).startswith("actions/cache/restore@"))
    cache.restore(restore, run_id, work)
    action = next(s for s in steps if str(s.get("uses", "")).startswith("OWNER/perfcheck@"))
    inputs = {**_action_inputs(), **{k: str(v) for k, v in action["with"].items()}}
    check_env = {**env, "IN_CONFIG": inputs["config"], "IN_SUITES": "after", "IN_REPORTS": inputs["reports"],
                 "IN_DIR": inputs["output-dir"], "IN_FLAVOUR": inputs["junit-flavour"], "IN_ARGS": inputs["args"],
                 "IN_UPDATE": "false", "IN_HISTORY": inputs["history"], "IN_HISTORY_MODE": inputs["history-mode"],
                 "IN_EVENT": event}
    done = _run_step(_action_steps()["check"], check_env, work)
    assert done.returncode == 0, done.stdout + done.stderr
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert outputs["exit-code"] in ("0", "1"), done.stdout + done.stderr
    for step in steps:
        # shell steps with expressions (${{ }}) the runner would fill in are not the recipe's
        if "run" in step and "env" not in step and "${{" not in step["run"]:
            got = _run_step(step, env, work)
            assert got.returncode == 0, (step.get("name"), got.stdout, got.stderr)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    if "verdict" in [s.get("name") for s in steps]:
        verdict = _run_step(_named(steps, "verdict"), {**env, "STATUS": outputs.get("status", "")}, work)
        assert verdict.returncode == 0, verdict.stdout
    save = next((s for s in steps if str(s.get("uses", "")).startswith("actions/cache/save@")), None)
    if save is not None:
        cache.save(save, run_id, work)
    return work, outputs


def test_github_nightly_keeps_the_history_across_runners(tmp_path: Path) -> None:
    workflow = _yaml("github-actions.yml")
    assert "schedule" in workflow[True] and "workflow_dispatch" in workflow[True]  # YAML 1.1 reads `on` as True
    nightly = workflow["jobs"]["nightly"]
    assert "schedule" in nightly["if"] and nightly["permissions"]["pages"] == "write"
    uses = [str(s.get("uses", "")) for s in nightly["steps"]]
    assert any(u.startswith("actions/deploy-pages@") for u in uses)
    assert any(u.startswith("actions/upload-pages-artifact@") for u in uses)
    cache = ActionsCache(tmp_path / "cache")

    first, out1 = _github_run(nightly, cache, 101, tmp_path, "schedule")
    with open_store(first / "perf-history.sqlite", create=False) as store:
        assert len(store.runs()) == 1
    assert out1["status"] == "0" and (first / "site" / "index.html").is_file()

    second, out2 = _github_run(nightly, cache, 102, tmp_path, "schedule")
    with open_store(second / "perf-history.sqlite", create=False) as store:
        runs = store.runs()
    assert len(runs) == 2 and runs["run_id"].is_unique  # the second runner saw the first one's run
    assert cache.entries == ["perf-history-101-1", "perf-history-102-1"]
    assert (second / "site" / "index.html").is_file() and (second / "perf" / "changes.md").is_file()

    # a pull request restores the newest store, is judged against it, appends nothing
    check = workflow["jobs"]["check"]
    pr, _ = _github_run(check, cache, 103, tmp_path, "pull_request")
    with open_store(pr / "perf-history.sqlite", create=False) as store:
        assert len(store.runs()) == 2
    summary = (pr / "perf" / "summary.md").read_text()
    assert "History: `perf-history.sqlite` (read-only: this run was not added)" in summary
    assert cache.entries == ["perf-history-101-1", "perf-history-102-1"]  # the check job saves nothing


class GitLabCache:
    """``cache: {key, paths, policy}``: pulled before the job, pushed after it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def pull(self, spec: dict, work: Path) -> None:
        for path in spec["paths"]:
            if (self.root / spec["key"] / path).exists():
                shutil.copy(self.root / spec["key"] / path, work / path)

    def push(self, spec: dict, work: Path) -> None:
        if spec.get("policy", "pull-push") == "pull":
            return
        for path in spec["paths"]:
            if (work / path).exists():
                (self.root / spec["key"]).mkdir(parents=True, exist_ok=True)
                shutil.copy(work / path, self.root / spec["key"] / path)


def _gitlab_script(lines: list[str], work: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    # the runner writes the job's script lines into one script for the shell (bash here)
    script = work / "job.sh"
    script.write_text("\n".join(lines) + "\n")
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)


def test_gitlab_scheduled_pages_job_keeps_the_history(tmp_path: Path) -> None:
    pipeline = _yaml("gitlab-ci.yml")
    pages = pipeline["pages"]
    assert pages["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "schedule"'}] and "public/" in pages["artifacts"]["paths"]
    cache = GitLabCache(tmp_path / "cache")
    env = _runner_env(tmp_path, CI_PIPELINE_SOURCE="schedule")
    for night in (1, 2):
        work = _workspace(tmp_path / f"night-{night}")
        cache.pull(pages["cache"], work)
        done = _gitlab_script(pages["script"], work, env)
        assert done.returncode == 0, done.stdout + done.stderr
        cache.push(pages["cache"], work)
        with open_store(work / "perf-history.sqlite", create=False) as store:
            assert len(store.runs()) == night  # the second night saw the first
        assert (work / "public" / "index.html").is_file()

    # a merge request: the check job pulls the store and only reads it
    mr = pipeline["kernel-performance"]
    assert mr["cache"]["policy"] == "pull" and "--history-read-only" in mr["variables"]["PERFCHECK_ARGS"]
    work = _workspace(tmp_path / "mr")
    cache.pull(mr["cache"], work)
    args = mr["variables"]["PERFCHECK_ARGS"]
    done = _gitlab_script([f"perfcheck check {args} --suite after --markdown perf/summary.md || test $? -eq 1"], work, env)
    assert done.returncode == 0, done.stdout + done.stderr
    cache.push(mr["cache"], work)
    with open_store(tmp_path / "cache" / "perf-history" / "perf-history.sqlite", create=False) as store:
        assert len(store.runs()) == 2
    assert re.search(r"History: `perf-history\.sqlite` \(read-only", (work / "perf" / "summary.md").read_text())


def test_action_history_inputs_and_pip_cache(tmp_path: Path) -> None:
    """history-mode auto: read-only on pull requests, append otherwise; a bad mode is
    an error; pip's downloads are cached between runs."""
    steps = _action_steps()
    inputs = _action_inputs()
    assert inputs["history"] == "" and inputs["history-mode"] == "auto" and inputs["pip-cache"] == "true"
    cache = steps["cache pip downloads"]
    assert cache["uses"].startswith("actions/cache@") and cache["if"] == "inputs.pip-cache == 'true'"
    assert cache["with"]["restore-keys"] and cache["with"]["key"].startswith(cache["with"]["restore-keys"])
    install = steps["install perfcheck (from the action's checkout)"]
    assert install["env"]["PIP_CACHE_DIR"] == cache["with"]["path"]

    work = _workspace(tmp_path / "repo")
    output = tmp_path / "output"
    env = _runner_env(tmp_path, GITHUB_ACTIONS="true", GITHUB_OUTPUT=str(output),
                      GITHUB_STEP_SUMMARY=str(tmp_path / "summary"))
    base = {**env, "IN_CONFIG": "perfcheck.toml", "IN_SUITES": "after", "IN_REPORTS": "json", "IN_DIR": "perf",
            "IN_FLAVOUR": "xunit", "IN_ARGS": "", "IN_UPDATE": "false", "IN_HISTORY": "h.sqlite",
            "IN_HISTORY_MODE": "auto"}
    store = work / "h.sqlite"
    for event, mode, runs in (("push", "auto", 1), ("pull_request", "auto", 1), ("schedule", "auto", 2),
                              ("pull_request_target", "auto", 2), ("pull_request", "append", 3),
                              ("push", "read-only", 3)):
        done = _run_step(steps["check"], {**base, "IN_EVENT": event, "IN_HISTORY_MODE": mode}, work)
        assert done.returncode == 0, done.stdout + done.stderr
        with open_store(store, create=False) as opened:
            assert len(opened.runs()) == runs, (event, mode)
    bad = _run_step(steps["check"], {**base, "IN_EVENT": "push", "IN_HISTORY_MODE": "sometimes"}, work)
    assert bad.returncode == 2 and "history-mode is append, read-only or auto, not 'sometimes'" in bad.stdout
    without = _run_step(steps["check"], {**base, "IN_EVENT": "push", "IN_HISTORY": ""}, work)
    assert without.returncode == 0
    with open_store(store, create=False) as opened:
        assert len(opened.runs()) == 3  # no history input: no store named
