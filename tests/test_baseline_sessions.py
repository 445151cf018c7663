"""Baselines written by concurrent sessions (issue 16 section 5): two ``pytest --perf``
sessions (or CLI runs) recording the same suite at once keep both sessions' kernels.
Each session reads the baseline when it starts and writes it at the end; the write
merges with what is on disk then, under a lock on the baseline folder."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from perfcheck import baseline as baselines
from perfcheck import checking
from perfcheck.config import resolver

pytestmark = pytest.mark.usefixtures("local_run")  # first runs record, as on a developer's machine

ROOT = Path(__file__).resolve().parent.parent
AFTER = ROOT / "examples" / "stencil" / "results-after.csv"


def _profile(folder: Path, tag: str) -> Path:
    """The example's profile with its kernels renamed ``<tag>_...``: one session's kernels."""
    text = AFTER.read_text().replace(',"', f',"{tag}_')  # the quoted KernelName field of each row
    path = folder / f"{tag}.csv"
    path.write_text(text)
    return path


def _session(profile: Path, baseline_dir: Path, *, update: bool = False):  # noqa: ANN202
    settings = resolver(cli={"baseline_dir": str(baseline_dir), "arch": "mi100", "update_baseline": update or None},
                        env={}, cwd=baseline_dir.parent).settings(
        None, profiles=[str(profile)], expect={"*": ["duration <= baseline + 5%"]})
    return [checking.evaluate_suite(suite) for suite in settings.suites.values()], settings


def _kernels(baseline_dir: Path) -> set[str]:
    (path,) = list(baseline_dir.rglob("*.json"))
    return {k.split("_", 1)[0] for k in baselines.load(path).kernels}


def test_two_sessions_recording_at_once_keep_both_sessions_kernels(tmp_path: Path) -> None:
    store = tmp_path / "baselines"
    one, two = _profile(tmp_path, "one"), _profile(tmp_path, "two")
    first, second = _session(one, store), _session(two, store)  # both start: no baseline yet
    checking.finish(*first)
    checking.finish(*second)  # used to replace the file with its own kernels only
    assert _kernels(store) == {"one", "two"}
    (path,) = list(store.rglob("*.json"))
    assert len(baselines.load(path).kernels) == 2 * len(_session(one, tmp_path / "x")[0][0].analysis.kernels)


def test_an_update_still_drops_the_kernels_it_no_longer_runs(tmp_path: Path) -> None:
    store = tmp_path / "baselines"
    one, two = _profile(tmp_path, "one"), _profile(tmp_path, "two")
    checking.finish(*_session(one, store))
    assert _kernels(store) == {"one"}
    checking.finish(*_session(two, store, update=True))  # an explicit update replaces the suite's kernels
    assert _kernels(store) == {"two"}


def test_a_concurrent_update_keeps_what_another_session_recorded_meanwhile(tmp_path: Path) -> None:
    store = tmp_path / "baselines"
    one, two, three = (_profile(tmp_path, t) for t in ("one", "two", "three"))
    checking.finish(*_session(one, store))
    updating = _session(two, store, update=True)  # reads {one}: will drop it
    checking.finish(*_session(three, store))  # meanwhile another session adds {three}
    checking.finish(*updating)
    assert _kernels(store) == {"two", "three"}


def _racer(profile: str, baseline_dir: str, barrier) -> None:  # noqa: ANN001
    runs, settings = _session(Path(profile), Path(baseline_dir))
    barrier.wait(60)
    checking.finish(runs, settings)


def test_sessions_in_parallel_processes_lose_no_kernels(tmp_path: Path) -> None:
    store = tmp_path / "baselines"
    tags = ["a", "b", "c", "d"]
    profiles = [_profile(tmp_path, t) for t in tags]
    context = multiprocessing.get_context("spawn")
    for trial in range(2):
        folder = store / f"t{trial}"
        barrier = context.Barrier(len(tags))
        workers = [context.Process(target=_racer, args=(str(p), str(folder), barrier)) for p in profiles]
        for w in workers:
            w.start()
        for w in workers:
            w.join(180)
        assert [w.exitcode for w in workers] == [0] * len(tags)
        assert _kernels(folder) == set(tags), trial
        assert not list(folder.rglob("*.tmp")) and not [p for p in folder.rglob("*") if p.suffix == ".lock"]
