"""Expectations on the timeline ("@run", "range:NAME") through `perfcheck check`:
the same grammar, baselines and exit codes as kernels. A planted host
synchronisation (idle +5% per step) and a planted extra H2D copy per step fail the
gate while every kernel check passes: no kernel got slower."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from conftest import profile
from perfcheck.analysis import analyse, with_timeline
from perfcheck.expect import evaluate
from perfcheck.model import ERROR, FAILED, PASSED

STEP_KERNELS = 20
KERNEL_US, GAP_US, COPY_US = 20.0, 2.0, 10.0


def training_trace(steps: int, *, extra_sync: bool = False, extra_copy: bool = False, rank: int = 0) -> dict:
    """A Kineto trace of ``steps`` training steps: per step an H2D copy (1 MB), then
    STEP_KERNELS kernels, an all-reduce under the last kernels, a host ProfilerStep
    range around it all. ``extra_sync`` inserts an idle wait of 5% of a step before
    the kernels (a host synchronisation); ``extra_copy`` a second H2D copy."""
    events: list[dict] = []
    step = COPY_US + STEP_KERNELS * (KERNEL_US + GAP_US) + 20.0
    wait = 0.05 * step if extra_sync else 0.0
    t = 1000.0
    for s in range(steps):
        start = t
        events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "ts": t,
                       "dur": COPY_US, "args": {"device": 0, "stream": 7, "bytes": 1_000_000}})
        t += COPY_US
        if extra_copy:
            events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "ts": t,
                           "dur": COPY_US, "args": {"device": 0, "stream": 7, "bytes": 1_000_000}})
            t += COPY_US
        t += wait
        for k in range(STEP_KERNELS):
            events.append({"ph": "X", "cat": "kernel", "name": f"void gemm_{k % 4}(float*)", "ts": t,
                           "dur": KERNEL_US, "args": {"device": 0, "stream": 7}})
            t += KERNEL_US + GAP_US
        events.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)",
                       "ts": t - 3 * (KERNEL_US + GAP_US), "dur": 3 * (KERNEL_US + GAP_US) + 10.0,
                       "args": {"device": 0, "stream": 20}})
        t += 20.0
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "ts": start,
                       "dur": t - start, "pid": 1, "tid": 1, "args": {}})
    return {"schemaVersion": 1, "distributedInfo": {"rank": rank}, "traceEvents": events,
            "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0}]}


def _config(folder: Path, trace: dict) -> Path:
    (folder / "trace.json").write_text(json.dumps(trace))
    config = folder / "perfcheck.toml"
    config.write_text("""
[tool.perfcheck]
baseline_dir = "baselines"

[tool.perfcheck.suites.train]
profiles = ["trace.json"]

[tool.perfcheck.suites.train.expect]
"@run" = ["gpu_busy >= 80%", "comm_share <= 20%", "idle <= baseline + 3%", "memcpy_h2d_calls <= baseline"]
"range:ProfilerStep*" = ["duration <= baseline + 3%"]
"*gemm_*" = ["duration <= baseline + 5%"]
""")
    return config


@pytest.mark.usefixtures("local_run")
@pytest.mark.parametrize("plant", ["extra_sync", "extra_copy"])
def test_planted_regression_fails_the_timeline_gate_not_the_kernels(cli, tmp_path: Path, plant: str):
    good = tmp_path / "good"
    good.mkdir()
    config = _config(good, training_trace(50))
    first = cli("check", "--config", config)
    assert first.code == 0, first.err + first.out
    assert "recorded" in first.out
    again = cli("check", "--config", config)
    assert again.code == 0, again.err + again.out

    _config(good, training_trace(50, **{plant: True}))  # same baseline folder, regressed trace
    result = cli("check", "--config", config)
    assert result.code == 1
    failed = [line for line in result.err.splitlines() if line.startswith("perfcheck: FAILED")]
    assert failed, result.err
    assert not any("gemm_" in line for line in failed)  # no kernel got slower
    if plant == "extra_copy":  # 10 µs more per 470 µs step: within the step's 3%, but one copy more per step
        line = next(line for line in failed if "@run" in line)
        assert "memcpy_h2d_calls 100 (+100.0%)" in line
        # the diagnosis names the change per step, with the bytes
        assert line.endswith("why: memcpy_h2d_calls +100.0%: H2D copies 1 -> 2 per step (976.6 KiB -> 1.907 MiB)")
    else:  # a 5% wait per step: the step time and the idle time both exceed their allowance
        step = next(line for line in failed if "range:ProfilerStep" in line and "duration" in line)
        idle = next(line for line in failed if "@run" in line and "idle" in line)
        # a wait of 5% of 470 µs per step: the step's diagnosis reads the run's timeline row
        assert step.endswith("why: duration +5.0%: idle +23.5 us per step; largest idle gap 10 us -> 23.5 us"), step
        assert "why: idle +53.7%: idle +23.5 us per step" in idle, idle


def test_per_step_metrics_of_the_synthetic_trace(tmp_path: Path):
    from perfcheck.ingest.timeline import read_timeline
    from perfcheck.metrics.timeline import timeline_metrics

    path = tmp_path / "trace.json"
    path.write_text(json.dumps(training_trace(10, extra_copy=True)))
    row = timeline_metrics(read_timeline([path])).devices.iloc[0]
    assert row["steps"] == 10 and row["memcpy_h2d_calls_per_step"] == 2.0 and row["memcpy_d2h_calls_per_step"] == 0
    assert row["memcpy_h2d_bytes_per_step"] == 2_000_000 and row["idle_per_step"] == pytest.approx(row["idle"] / 10)
    no_steps = training_trace(3)
    no_steps["traceEvents"] = [e for e in no_steps["traceEvents"] if e["cat"] != "user_annotation"]
    path.write_text(json.dumps(no_steps))
    row = timeline_metrics(read_timeline([path])).devices.iloc[0]
    assert pd.isna(row["steps"]) and pd.isna(row["idle_per_step"])  # no steps: missing, not 0


@pytest.mark.usefixtures("local_run")
def test_history_detect_names_the_timeline_change(cli, tmp_path: Path):
    store = tmp_path / "history.sqlite"
    for night in range(14):  # 8 nights as before, then a host wait and an extra copy per step
        regressed = night >= 8
        config = _config(tmp_path, training_trace(20, extra_sync=regressed, extra_copy=regressed))
        assert cli("check", "--config", config, "--history", store).code == (1 if regressed else 0)
    result = cli("history", "detect", "--history", store, "--json")
    found = {(f["kernel"], f["metric"]): f["diagnosis"]["text"] for f in json.loads(result.out)["findings"]}
    assert found[("range:ProfilerStep", "duration")] == (
        "duration +7.1%: H2D copies 1 -> 2 per step (976.6 KiB -> 1.907 MiB); idle +23.5 us per step; "
        "largest idle gap 10 us -> 23.5 us")


def test_absolute_expectations_on_a_real_trace():
    path = profile("kineto/hta-critical-path-alexnet-a100/benchmark_result_2869224_1695835535_trace.json.gz")
    analysis = with_timeline(analyse([path]), [path])
    checks = evaluate("s", {"@run": ["gpu_busy >= 85%", "comm_share <= 20%"],
                            "range:re:warmup": ["calls == 2"], "*computeOffsets*": ["calls >= 1"]}, analysis)
    by = {(c.kernel, c.metric): c for c in checks}
    busy = by[("@run", "gpu_busy_pct")]
    assert busy.outcome == FAILED and busy.observed == pytest.approx(0.5119, abs=1e-3)  # 0.51% busy
    assert "gpu_busy_pct 0.5%; expected >= 85.0%" in busy.message
    assert by[("@run", "comm_share_pct")].outcome == PASSED  # no NCCL kernels: 0%
    assert by[("range:[param|pytorch.model.alex_net|0|0|0|warmup|forward]", "calls")].outcome == PASSED
    assert [c.kernel for c in checks if c.metric == "calls" and c.pattern.startswith("*")] == [
        "void cask_cudnn::computeOffsetsKernel<false, false>(cask_cudnn::ComputeOffsetsParams)"]


def test_kernel_patterns_never_match_timeline_rows():
    path = profile("kineto/hta-amd-mi250-rocm6.2-minitoy/mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    analysis = with_timeline(analyse([path]), [path])
    checks = evaluate("s", {"*": ["calls >= 1"]}, analysis)
    assert checks and not any(c.kernel.startswith(("@run", "range:")) for c in checks)


def test_timeline_metric_on_a_kernel_says_where_it_belongs():
    path = profile("kineto/hta-amd-mi250-rocm6.2-minitoy/mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    check = evaluate("s", {"Cijk*": ["gpu_busy >= 50%"]}, analyse([path]))[0]
    assert check.outcome == ERROR and 'a timeline metric: declare it under "@run"' in check.message


def test_range_pattern_without_a_match_lists_the_ranges():
    path = profile("kineto/hta-amd-mi250-rocm6.2-minitoy/mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    analysis = with_timeline(analyse([path]), [path])
    check = evaluate("s", {"range:Step*": ["duration <= 1 s"]}, analysis)[0]
    assert check.outcome == ERROR and "range:ProfilerStep" in check.message
    no_timeline = evaluate("s", {"@run": ["gpu_busy >= 50%"]}, analyse([path]))[0]
    assert no_timeline.outcome == ERROR and "no timeline was read" in no_timeline.message


@pytest.mark.usefixtures("local_run")
def test_history_keeps_the_timeline_series(cli, tmp_path: Path):
    from perfcheck.history.store import open_store

    config = _config(tmp_path, training_trace(20))
    store = tmp_path / "history.sqlite"
    for _ in range(2):
        result = cli("check", "--config", config, "--history", store)
        assert result.code == 0, result.err
    with open_store(store, create=False) as db:
        series = db.series(kernel=["@run", "range:ProfilerStep"], metric=["gpu_busy_pct", "duration", "idle"])
    got = series.groupby(["kernel", "metric"]).size().to_dict()
    assert got == {("@run", "gpu_busy_pct"): 2, ("@run", "idle"): 2, ("range:ProfilerStep", "duration"): 2}
    step = series[series["kernel"] == "range:ProfilerStep"]
    assert (step["unit"] == "s").all() and (step["n"] == 20).all()  # 20 steps: the samples behind the median


@pytest.mark.usefixtures("local_run")
def test_pr_comment_and_dashboard_show_the_timeline_rows(cli, tmp_path: Path):
    store = tmp_path / "history.sqlite"
    config = _config(tmp_path, training_trace(20))
    assert cli("check", "--config", config, "--history", store).code == 0
    _config(tmp_path, training_trace(20, extra_sync=True, extra_copy=True))
    summary = tmp_path / "summary.md"
    assert cli("check", "--config", config, "--history", store, "--markdown", summary).code == 1
    rows = {line.split(" | ")[2]: line for line in summary.read_text().splitlines() if line.startswith("| ❌")}
    # beside a timeline number: its share of the span, per step, a range's calls: never "of peak"
    assert rows["`idle <= baseline + 3%`"].endswith("| 13.3% of span |")
    assert rows["`memcpy_h2d_calls <= baseline`"].endswith("| 2 per step |")
    assert rows["`duration <= baseline + 3%`"].endswith("| 20 calls, p90 503.5 us |")
    assert "Why `range:ProfilerStep` changed: duration \\+7.1%: H2D copies 1 -\\> 2 per step" in summary.read_text()

    site = tmp_path / "site"
    assert cli("history", "report", "--history", store, "--html", site).code == 0
    page = next(site.glob("suite-train*.html")).read_text()
    # the run and its ranges under their own heading, before the kernels
    timeline, kernels = page.index("<h2>Timeline: the run and its ranges</h2>"), page.index("<h2>Kernels</h2>")
    assert timeline < page.index(">@run<") < page.index(">range:ProfilerStep<") < kernels < page.index("gemm_0")
    index = (site / "index.html").read_text()
    # 5 kernels (4 gemm, the all-reduce): @run and the range are not kernels
    assert 'data-label="kernels">5</td>' in index


@pytest.mark.usefixtures("local_run")
def test_junit_and_markdown_name_the_timeline_subjects(cli, tmp_path: Path):
    config = _config(tmp_path, training_trace(10))
    result = cli("check", "--config", config, "--junit", tmp_path / "junit.xml", "--markdown", tmp_path / "summary.md")
    assert result.code == 0, result.err
    junit = (tmp_path / "junit.xml").read_text()
    assert "@run" in junit and "range:ProfilerStep" in junit and "gpu_busy &gt;= 80%" in junit
    markdown = (tmp_path / "summary.md").read_text()
    assert "@run" in markdown and "range:ProfilerStep" in markdown


def test_rank_spread_expectations(tmp_path: Path):
    from test_timeline_metrics import comm_trace

    paths = []
    for rank, stretch in ((0, 1.0), (1, 1.5), (2, 1.0)):
        paths.append(tmp_path / f"rank{rank}.json")
        paths[-1].write_text(json.dumps(comm_trace(rank, stretch)))
    analysis = with_timeline(analyse(paths), paths)
    checks = evaluate("s", {"@ranks": ["span_imbalance <= 1.1", "straggler == 1", "gpu_busy_pct_min >= 60%"],
                            "@run:rank1*": ["span <= 600 us"]}, analysis)
    by = {(c.kernel, c.metric): c for c in checks}
    # spans 550, 825, 550 µs: max / mean = 825 / 641.7
    assert by[("@ranks", "span_imbalance")].outcome == FAILED
    assert by[("@ranks", "span_imbalance")].observed == pytest.approx(825 / ((550 * 2 + 825) / 3))
    assert by[("@ranks", "straggler")].outcome == PASSED
    assert by[("@ranks", "gpu_busy_pct_min")].outcome == PASSED  # 360 / 550 = 65.5% on every rank
    assert [c.kernel for c in checks if c.metric == "span"] == ["@run:rank1:gpu0"]
    assert by[("@run:rank1:gpu0", "span")].outcome == FAILED


def test_rank_spread_needs_ranks():
    path = profile("kineto/hta-critical-path-alexnet-a100/benchmark_result_2869224_1695835535_trace.json.gz")
    analysis = with_timeline(analyse([path]), [path])
    check = evaluate("s", {"@ranks": ["span_imbalance <= 1.1"]}, analysis)[0]
    assert check.outcome == ERROR and "needs the timelines of several ranks" in check.message
    check = evaluate("s", {"@run": ["span_imbalance <= 1.1"]}, analysis)[0]
    assert check.outcome == ERROR and 'declare it under "@ranks"' in check.message


def test_timeline_diagnosis_without_steps_and_when_nothing_moved():
    from perfcheck.diagnosis import TIMELINE_UNCHANGED, diagnose

    run = {"span": 1.0, "idle": 0.10, "idle_gap_max": 0.01, "memcpy_h2d_calls": 50.0, "memcpy_h2d_bytes": 5e7,
           "comm_time": 0.2}
    # no ProfilerStep ranges: the changes over the whole run
    slower = {**run, "idle": 0.15, "memcpy_h2d_calls": 100.0, "memcpy_h2d_bytes": 1e8}
    found = diagnose(run, slower, subject="idle")
    assert found.text() == "idle +50.0%: H2D copies 50 -> 100 (47.68 MiB -> 95.37 MiB)"  # the subject: not again
    assert diagnose(run, slower, subject="memcpy_h2d_calls").reason() == "H2D bytes 47.68 MiB -> 95.37 MiB; idle +50 ms"
    # a range row whose device did the same: the step's time went elsewhere
    step = {**run, "calls": 20.0, "duration": 0.05}
    same = diagnose(step, {**step, "duration": 0.06}, subject="duration")
    assert same.time_only and same.text() == f"duration +20.0%: {TIMELINE_UNCHANGED}"
