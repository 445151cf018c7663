"""GitLab metrics report: OpenMetrics text, one gauge per checked kernel x metric."""

from __future__ import annotations

import re
from pathlib import Path

from perfcheck.model import ERROR, FAILED, PASSED, RECORDED, Check
from perfcheck.report.openmetrics import escape_label, metric_name, openmetrics_text, write_openmetrics


def _check(kernel: str, expression: str, metric: str, observed: float | None, unit: str, outcome: str = PASSED,
           suite: str = "stencil") -> Check:
    return Check(suite, kernel, kernel, expression, metric, ">=", observed, None, unit, outcome, "expectation", "m")


SUITES = {
    "stencil": [
        _check("EOCloverFBCGPU", "hbm_bw >= 85% of peak", "hbm_bw", 1.1e12, "B/s"),
        _check("EOCloverFBCGPU", "occupancy >= 40%", "occupancy_pct", 20.0, "%", FAILED),
        # two bounds on one metric observe one value: one sample
        _check("OECloverDagFBCGPU", "duration <= baseline + 5%", "duration", 0.002936, "s", FAILED),
        _check("OECloverDagFBCGPU", "duration <= 2.7 ms", "duration", 0.002936, "s", FAILED),
        _check("Nope*", "occupancy >= 40%", "occupancy_pct", None, "%", ERROR),
    ],
    "gemm": [
        _check('void gemm_v0<float>(T1 *, "x" \\ y)', "flop_rate >= 1 TFLOP/s", "flop_rate", 1859700093826.5728,
               "FLOP/s", RECORDED, suite="gemm"),
        _check("k", "scratch_per_thread == 0", "scratch_per_thread", 0.0, "B", suite="gemm"),
    ],
}

EXPECTED = """\
# TYPE perfcheck_duration_seconds gauge
# UNIT perfcheck_duration_seconds seconds
# HELP perfcheck_duration_seconds perfcheck: duration of each checked kernel, in s
perfcheck_duration_seconds{suite="stencil",kernel="OECloverDagFBCGPU"} 0.002936
# TYPE perfcheck_flop_rate gauge
# HELP perfcheck_flop_rate perfcheck: flop_rate of each checked kernel, in FLOP/s
perfcheck_flop_rate{suite="gemm",kernel="void gemm_v0<float>(T1 *, %22x%22 %5C y)"} 1859700093826.5728
# TYPE perfcheck_hbm_bw_bytes_per_second gauge
# UNIT perfcheck_hbm_bw_bytes_per_second bytes_per_second
# HELP perfcheck_hbm_bw_bytes_per_second perfcheck: hbm_bw of each checked kernel, in B/s
perfcheck_hbm_bw_bytes_per_second{suite="stencil",kernel="EOCloverFBCGPU"} 1100000000000
# TYPE perfcheck_occupancy_percent gauge
# UNIT perfcheck_occupancy_percent percent
# HELP perfcheck_occupancy_percent perfcheck: occupancy_pct of each checked kernel, in %
perfcheck_occupancy_percent{suite="stencil",kernel="EOCloverFBCGPU"} 20
# TYPE perfcheck_scratch_per_thread_bytes gauge
# UNIT perfcheck_scratch_per_thread_bytes bytes
# HELP perfcheck_scratch_per_thread_bytes perfcheck: scratch_per_thread of each checked kernel, in B
perfcheck_scratch_per_thread_bytes{suite="gemm",kernel="k"} 0
# TYPE perfcheck_checks gauge
# HELP perfcheck_checks perfcheck: number of checks per suite and outcome
perfcheck_checks{suite="gemm",outcome="passed"} 1
perfcheck_checks{suite="gemm",outcome="failed"} 0
perfcheck_checks{suite="gemm",outcome="recorded"} 1
perfcheck_checks{suite="gemm",outcome="error"} 0
perfcheck_checks{suite="stencil",outcome="passed"} 1
perfcheck_checks{suite="stencil",outcome="failed"} 3
perfcheck_checks{suite="stencil",outcome="recorded"} 0
perfcheck_checks{suite="stencil",outcome="error"} 1
# EOF
"""

# OpenMetrics text: metric names, label sets with escaped values, a number.
_SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*\{([a-z_]+="(?:[^"\\\n]|\\["\\n])*",?)*\} -?[0-9.e+]+$|^[a-zA-Z_:][a-zA-Z0-9_:]* \S+$')
_META = re.compile(r"^# (TYPE \S+ gauge|UNIT \S+ [a-z_]+|HELP \S+ .*|EOF)$")


def test_exact_text() -> None:
    assert openmetrics_text(SUITES) == EXPECTED


def test_every_line_is_openmetrics() -> None:
    lines = openmetrics_text(SUITES).splitlines()
    assert lines[-1] == "# EOF"
    for line in lines:
        assert _SAMPLE.match(line) or _META.match(line), line
    # a family's UNIT is a suffix of its name, as the spec requires
    for line in lines:
        if line.startswith("# UNIT "):
            _, _, name, unit = line.split(" ")
            assert name.endswith("_" + unit)


def test_names_and_labels() -> None:
    assert metric_name("hbm_bw", "B/s") == "perfcheck_hbm_bw_bytes_per_second"
    assert metric_name("hbm_bytes", "B") == "perfcheck_hbm_bytes"  # no doubled suffix
    assert metric_name("occupancy_pct", "%") == "perfcheck_occupancy_percent"
    assert metric_name("l2-hit.rate", "%") == "perfcheck_l2_hit_rate_percent"
    assert metric_name("ai_hbm", "FLOP/B") == "perfcheck_ai_hbm"
    assert escape_label('a"b\\c\nd') == "a%22b%5Cc%0Ad"
    assert escape_label("{lambda(int)#1}") == "{lambda(int)%231}"


def test_write_is_atomic(tmp_path: Path) -> None:
    path = write_openmetrics(tmp_path / "ci" / "metrics.txt", SUITES)
    assert path.read_text() == EXPECTED
    assert [p.name for p in path.parent.iterdir()] == ["metrics.txt"]


def test_no_checks_is_still_a_complete_exposition() -> None:
    assert openmetrics_text({}) == (
        "# TYPE perfcheck_checks gauge\n"
        "# HELP perfcheck_checks perfcheck: number of checks per suite and outcome\n"
        "# EOF\n"
    )


HOSTILE = [
    "void Kokkos::Impl::cuda_parallel_launch_local_memory<Kokkos::Impl::ParallelFor<main::{lambda(int)#1}, Kokkos::RangePolicy<>>>",
    "RAJA::policy::cuda::impl::forall_cuda_kernel<256ul, 1ul, RAJA::Iterators::numeric_iterator<long, long, long*>, main::'lambda'(int)#2>",
    'say "hi" and \'bye\'',
    "back\\slash \\n not a newline",
    "new\nline\rand\x1b[31mESC\x00",
    "percent 100% {braces} [brackets] $HOME `tick` \u00e9\u4e2d",
    "x" * 5000,
    "x" * 4999 + "y",
]


def _gitlab_parse(text: str) -> dict[str, str]:
    """A model of GitLab's metrics parser (lib/gitlab/ci/parsers/metrics/generic.rb):
    per non-blank line, drop everything from '#' on, split like a shell (Ruby's
    Shellwords; Python's shlex in POSIX mode follows the same quoting rules), first
    word is the name, second the value. An unbalanced quote raises there (and GitLab
    drops the report): here too."""
    import shlex

    metrics = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        words = shlex.split(re.sub(r"#.*$", "", line))
        if not words or len(words) < 2:
            continue
        metrics[words[0]] = words[1]
    return metrics


def test_gitlab_parser_reads_every_sample_whatever_the_kernel_name() -> None:
    from urllib.parse import unquote

    suites = {"s#1": [_check(name, "duration <= 1 ms", "duration", 0.001 + i, "s", suite="s#1")
                      for i, name in enumerate(HOSTILE)]}
    text = openmetrics_text(suites)
    parsed = _gitlab_parse(text)
    durations = {k: v for k, v in parsed.items() if k.startswith("perfcheck_duration_seconds")}
    # one metric per kernel, each with its own value: nothing cut, merged or dropped
    assert sorted(float(v) for v in durations.values()) == [0.001 + i for i in range(len(HOSTILE))]
    for line in text.splitlines():
        assert "#" not in line or line.startswith("# "), line
        assert len(line) < 600
    # the encoding is reversible for names that are not shortened
    labels = re.findall(r'kernel="([^"]*)"', text)
    decoded = {unquote(v) for v in labels}
    for name in HOSTILE[:6]:
        assert name in decoded
    # still OpenMetrics
    for line in text.splitlines():
        assert _SAMPLE.match(line) or _META.match(line), line


def test_xfail_outcomes_are_counted_when_present() -> None:
    """An xfailed check was in no perfcheck_checks line: the counts did not add up to the checks."""
    from dataclasses import replace

    from perfcheck.model import XFAILED

    xfailed = replace(SUITES["stencil"][0], outcome=XFAILED)
    text = openmetrics_text({"stencil": [xfailed], "other": []})
    assert 'perfcheck_checks{suite="stencil",outcome="xfailed"} 1' in text
    assert 'perfcheck_checks{suite="other",outcome="xfailed"} 0' in text
    assert 'outcome="xpassed"' not in text and 'outcome="xfailed"' not in openmetrics_text(SUITES)
