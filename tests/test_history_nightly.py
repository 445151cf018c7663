"""Issue 15's scenario end to end: eight nights of the stencil example in a history
store, its four kernels 30% slower from night 6, then five more slow nights. The
regression stays visible (check and detect fail every slow night) until someone
accepts it: through the CLI, and through ``pytest --perf --perf-history``."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "stencil"
SLOW_FROM, NIGHTS = 6, 13  # nights 6..8 slow, then five more slow nights
CONFIG = f"""\
[tool.perfcheck]
device = "mi100"
peaks = ["{EXAMPLE / 'machines' / 'mulan-mi100.toml'}"]
baseline_dir = "baselines"
history = "perf-history.sqlite"

[tool.perfcheck.suites.after]
profiles = ["night.csv"]
[tool.perfcheck.suites.after.expect]
"*Clover*FBCGPU*" = ["duration <= baseline + 5%"]
"""


@pytest.fixture
def nightly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("PERFCHECK_HISTORY", "PERFCHECK_ACCEPTED", "GITHUB_SHA", "CI_COMMIT_SHA", "GITHUB_ACTIONS",
                 "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CI", "false")  # night 1 records the baseline, as a developer would before committing it
    monkeypatch.setenv("USER", "night-shift")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    return tmp_path


def _night(folder: Path, night: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """night.csv: the stencil example's profile with the four Clover kernels 1% noisy
    from night to night, and 30% slower from night SLOW_FROM."""
    frame = pd.read_csv(EXAMPLE / "results-after.csv")
    drift = float(np.exp(np.random.default_rng(night).normal(0.0, 0.01)))
    factor = np.where(frame["KernelName"].str.contains("Clover"), drift * (1.3 if night >= SLOW_FROM else 1.0), 1.0)
    span = (frame["EndNs"] - frame["BeginNs"]).to_numpy(dtype="float64")
    frame["EndNs"] = frame["BeginNs"] + np.round(span * factor).astype("int64")
    frame["CompleteNs"] = frame["EndNs"] + 1000
    frame.to_csv(folder / "night.csv", index=False)
    monkeypatch.setenv("PERFCHECK_COMMIT", f"{night:02d}" + "ab" * 19)


def test_eight_nights_through_the_cli(nightly: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    (nightly / "perfcheck.toml").write_text(CONFIG)
    for night in range(1, NIGHTS + 1):
        _night(nightly, night, monkeypatch)
        checked = cli("check", "--json", "out.json")
        assert checked.code == (1 if night >= SLOW_FROM else 0), (night, checked.out)
        detected = cli("history", "detect", "--metric", "duration")  # the run just checked is stored
        if night >= SLOW_FROM + 1:  # a change needs two runs at its new level to be told from a spike
            assert detected.code == 1, (night, detected.out)  # open, however old: never green by itself
            assert "4 open regressions" in detected.out, detected.out
        else:
            assert detected.code == 0, (night, detected.out)
        if night >= SLOW_FROM + 2:  # the store the check reads holds night 7 from night 8 on
            checks = json.loads((nightly / "out.json").read_text())["suites"]["after"]["checks"]
            assert len(checks) == 4 and all(c["outcome"] == "failed" for c in checks)
            for c in checks:
                assert c["message"].startswith("open regression since 06abab"), c["message"]
                assert "accept it with perfcheck history accept" in c["message"] and re.search(r", \+(2[6-9]|3[0-4])\.\d%: ", c["message"]), c["message"]
    doc = cli("history", "detect", "--json", "--metric", "duration").json()
    assert doc["open_regressions"] == 4 and doc["new_regressions"] == 0  # night 6 is 8 runs back
    assert {p["run_id"] for p in doc["findings"]} == {doc["findings"][0]["run_id"]}
    assert cli("history", "detect", "--fail-on", "new").code == 0

    # the history accepts, the committed baseline file still fails by more than 5% + noise
    accept = cli("history", "accept", "*Clover*", "--reason", "registers instead of LDS: slower on purpose")
    assert accept.code == 0, accept.err
    assert cli("history", "detect").code == 0
    _night(nightly, NIGHTS + 1, monkeypatch)
    assert cli("check", "--json", "out.json").code == 1
    for c in json.loads((nightly / "out.json").read_text())["suites"]["after"]["checks"]:
        # both figures: passes against the accepted level, fails the reviewed file beyond allowance + noise
        assert c["outcome"] == "failed" and "vs history" in c["message"], c["message"]
        assert re.search(r"vs the baseline file 1\.4\d* ms \(\+[23]\d\.\d%\).*\(allowance \+ measured noise\), failed",
                         c["message"]), c["message"]
    # the baseline update makes it the reference; open regressions of its kernels are accepted with it
    update = cli("baseline", "update")
    assert update.code == 0
    _night(nightly, NIGHTS + 2, monkeypatch)
    assert cli("check").code == 0
    assert cli("history", "detect").code == 0
    entries = tomllib.loads((nightly / "baselines" / "accepted.toml").read_text())["accepted"]
    assert len(entries) >= 4 and {e["who"] for e in entries} == {"night-shift"}


def test_baseline_update_accepts_the_open_regressions(nightly: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    (nightly / "perfcheck.toml").write_text(CONFIG)
    for night in range(1, SLOW_FROM + 3):
        _night(nightly, night, monkeypatch)
        cli("check")
    assert cli("history", "detect").code == 1
    update = cli("baseline", "update")
    assert update.code == 0
    assert "the baseline update accepted" in update.err and "baselines/accepted.toml" in update.err, update.err
    entries = tomllib.loads((nightly / "baselines" / "accepted.toml").read_text())["accepted"]
    assert {e["reason"] for e in entries} == {"baseline updated (perfcheck baseline update)"}
    assert len({e["kernel"] for e in entries}) == 4 and {e["metric"] for e in entries} == {"*"}
    assert cli("history", "detect").code == 0
    _night(nightly, SLOW_FROM + 3, monkeypatch)
    assert cli("check").code == 0  # the new level: history and the baseline file agree


def test_eight_nights_through_pytest_perf_history(nightly: Path, pytester: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import perfcheck.analysis  # noqa: F401  (pytester's in-process runs: numpy is loaded once, here)
    import perfcheck.checking  # noqa: F401

    pytester.makefile(".toml", pyproject=CONFIG.replace('history = "perf-history.sqlite"\n', ""))
    store = pytester.path / "perf-history.sqlite"
    for night in range(1, NIGHTS + 1):
        _night(pytester.path, night, monkeypatch)
        result = pytester.runpytest("--perf", "-p", "no:randomly", "-p", "no:cacheprovider", "--perf-history", str(store))
        outcome = result.parseoutcomes()
        if night < SLOW_FROM:
            assert result.ret == 0, (night, result.stdout.str())
        else:
            assert result.ret == 1 and outcome.get("failed") == 4, (night, result.stdout.str())
        if night >= SLOW_FROM + 2:
            result.stdout.fnmatch_lines(["*open regression since 06abab*accept it with perfcheck history accept*"])
