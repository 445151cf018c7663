"""Issue 18 §3: text that fits the terminal (COLUMNS / the terminal's size, 80 when a
terminal says nothing, no limit in a pipe), and a progress line on stderr for long
work, only where a person watches."""

from __future__ import annotations

import io
import os

import pandas as pd
import pytest

from perfcheck.progress import Progress, elapsed_text
from perfcheck.report.text import _table, ceiling_lines, formats_text, kernel_table
from perfcheck.terminal import DEFAULT_COLUMNS, interactive, output_width, under_ci

from conftest import ROOT

STENCIL = ROOT / "examples" / "stencil"


class _Tty(io.StringIO):
    """A stream that says it is a terminal (of unknown size: no file descriptor)."""

    def isatty(self) -> bool:
        return True


# --- how wide ------------------------------------------------------------------------------


def test_width_from_columns_else_terminal_else_none_in_a_pipe() -> None:
    assert output_width(_Tty(), {"COLUMNS": "100"}) == 100
    assert output_width(io.StringIO(), {"COLUMNS": "72"}) == 72  # asked for, even in a pipe
    assert output_width(io.StringIO(), {}) is None  # a pipe: whole lines
    tty_width = output_width(_Tty(), {"COLUMNS": "junk"})
    assert tty_width is not None and tty_width > 0  # the terminal's size, or 80 when it says none


def test_a_terminal_of_unknown_size_is_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback=(0, 0): os.terminal_size(fallback))
    assert output_width(_Tty(), {}) == DEFAULT_COLUMNS == 80


def test_progress_only_for_a_person_on_a_terminal() -> None:
    assert interactive(_Tty(), {"TERM": "xterm"})
    assert not interactive(io.StringIO(), {"TERM": "xterm"})  # a pipe
    assert not interactive(_Tty(), {"CI": "true"}) and under_ci({"GITLAB_CI": "true"})
    assert not under_ci({"CI": "false"}) and not under_ci({})
    assert not interactive(_Tty(), {"TERM": "dumb"})


# --- the progress line -----------------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_waits_two_seconds_then_redraws_in_place_and_erases() -> None:
    clock, out = _Clock(), _Tty()
    with Progress("reading trace.csv", total=3 * 2**30, stream=out, enabled=True, clock=clock) as progress:
        progress.update(2**30, rows=1000)
        assert out.getvalue() == ""  # quick work prints nothing
        clock.now += 2.5
        progress.update(2**30, rows=2_345_678)
        first = out.getvalue()
        assert first == "\rperfcheck: reading trace.csv: 1 GiB of 3 GiB (33%), 2,345,678 rows, 2 s\x1b[K"
        clock.now += 0.1
        progress.update(2 * 2**30)
        assert out.getvalue() == first  # at most four redraws a second
        clock.now += 0.3
        progress.update(2 * 2**30)
        assert out.getvalue().endswith("2 GiB of 3 GiB (67%), 2,345,678 rows, 2 s\x1b[K")
    assert out.getvalue().endswith("\r\x1b[K")  # erased: the result starts on a clean line


def test_progress_never_draws_in_a_pipe_or_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    pipe = io.StringIO()
    progress = Progress("reading", total=10, stream=pipe, clock=clock)
    clock.now += 10
    progress.update(5, rows=5)
    progress.close()
    assert pipe.getvalue() == ""
    monkeypatch.setenv("CI", "true")
    tty = _Tty()
    progress = Progress("reading", total=10, stream=tty, clock=clock)
    clock.now += 10
    progress.update(5)
    progress.close()
    assert tty.getvalue() == ""


def test_elapsed_text() -> None:
    assert [elapsed_text(s) for s in (0.4, 59.9, 125, 3720)] == ["0 s", "59 s", "2 min 05 s", "1 h 02 min"]


def test_reading_a_profile_shows_progress_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """`analyse` (inspect, check, compare) draws the line for a slow read: rows and
    bytes of the profile, on stderr, never on stdout."""
    import perfcheck.progress as progress_module
    from perfcheck.analysis import analyse

    tty = _Tty()
    monkeypatch.setattr(progress_module.sys, "stderr", tty)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    original = Progress.__init__

    def eager(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        kwargs.update(delay=0.0, interval=0.0)
        original(self, *args, **kwargs)

    monkeypatch.setattr(Progress, "__init__", eager)
    analyse([STENCIL / "results-after.csv"])
    size = (STENCIL / "results-after.csv").stat().st_size
    drawn = tty.getvalue()
    assert "perfcheck: reading results-after.csv: " in drawn and "100 rows" in drawn
    from perfcheck.units import format_value

    assert f"{format_value(size, 'B')} of {format_value(size, 'B')} (100%)" in drawn
    assert drawn.endswith("\r\x1b[K")


# --- tables that fit -------------------------------------------------------------------------

LONG = "void stencil_kernel_with_a_very_long_templated_name<double, 3, 7>(double const*, double*, int, int)"


def _frame() -> pd.DataFrame:
    return pd.DataFrame({
        "kernel": [LONG, LONG.replace("<double, 3, 7>", "<float, 3, 7>"), "short_kernel(int)"],
        "calls": [10, 10, 1], "duration": [1e-3, 2e-3, 3e-6], "duration_mean": [1e-3, 2e-3, 3e-6],
        "duration_min": [1e-3, 2e-3, 3e-6], "duration_max": [1e-3, 2e-3, 3e-6],
        "duration_total": [1e-2, 2e-2, 3e-6], "vgpr": [64, 64, 8], "sgpr": [32, 32, 16],
        "lds_per_workgroup": [0.0, 24576.0, 0.0], "scratch_per_thread": [0.0, 0.0, 0.0],
    })


@pytest.mark.parametrize("width", [80, 100, 120])
def test_kernel_table_fits_the_width_names_shortened_in_the_middle_first(width: int) -> None:
    text = kernel_table(_frame(), width=width)
    assert max(len(line) for line in text.splitlines()) <= width, text
    # the signatures go first, then the middle of the name: both ends stay
    assert "stencil_kernel_with_a_very_long_templated_name<double, 3, 7>(" not in text
    assert "<double, 3, 7>" in text and "<float, 3, 7>" in text or "\u2026" in text
    assert "short_kernel" in text


def test_columns_wrap_once_names_are_as_short_as_they_go() -> None:
    text = kernel_table(_frame(), width=80)
    blocks = text.split("\n\n")
    assert len(blocks) >= 2  # a second block of columns under the first
    assert all(block.splitlines()[0].startswith("kernel") for block in blocks)  # each repeats the names
    headers = " ".join(block.splitlines()[0] for block in blocks).split()
    for column in ("calls", "median", "total", "vgpr", "lds/wg", "scratch"):
        assert headers.count(column) == 1


def test_unlimited_width_and_full_names_keep_whole_names() -> None:
    assert LONG in kernel_table(_frame(), width=None)
    wrapped = kernel_table(_frame(), width=80, full_names=True)
    assert LONG in wrapped and len(wrapped.split("\n\n")) >= 3


def test_a_table_that_fits_is_unchanged() -> None:
    rows = [["a", "1"], ["bb", "22"]]
    assert _table(["k", "v"], rows, right={1}, width=80, shrink=(0,)) == _table(["k", "v"], rows, right={1})


def test_formats_fit_100_columns(cli) -> None:
    from perfcheck.ingest import FORMATS

    text = formats_text(FORMATS, width=100)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert [line.split()[0] for line in text.splitlines() if not line.startswith(" ")] == [f.name for f in FORMATS]
    result = cli("formats")
    assert result.code == 0 and max(len(line) for line in result.out.splitlines()) <= 100


def test_inspect_fits_columns_and_names_each_compared_ceiling_once(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    result = cli("inspect", STENCIL / "results-before.csv", "--arch", "mi100", "--peaks",
                 STENCIL / "machines" / "mulan-mi100.toml")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert max(len(line) for line in lines) <= 80, "\n".join(line for line in lines if len(line) > 80)
    block = [line for line in lines if line.startswith("ceiling")]
    assert len(block) == 1 and block[0].startswith("ceilings: ")
    assert "(empirical from mixbench-log.txt; * theoretical from arch database: mi100)" in result.out
    assert "hbm_bw 1.075 TB/s" in result.out and "gips 180.2 Ginst/s*" in result.out  # * theoretical
    assert "flop_rate_fp32 21.99 TFLOP/s" in result.out and "23.1 TFLOP/s" not in result.out  # measured
    # only ceilings a kernel has a counter for: no fp64 (no fp64 FLOPs), no L2 (no L2 bytes)
    assert "flop_rate_fp64" not in result.out and "l2_bw" not in result.out


def test_no_ceiling_lines_without_a_counter_to_compare() -> None:
    from perfcheck.analysis import analyse

    analysis = analyse([STENCIL / "kernel_trace.csv"], arch="mi100")  # a trace: durations only
    assert analysis.ceilings and ceiling_lines(analysis) == []


def test_check_table_fits_80_columns(cli, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    result = cli("check", "--config", STENCIL / "perfcheck.toml", "--suite", "after", "--baseline-dir", tmp_path)
    assert result.code == 0, result.err
    table = result.out.split("perfcheck: ", 1)[0].rstrip().splitlines()
    assert table[0].split()[:2] == ["suite", "kernel"]
    assert max(len(line) for line in table) <= 80, "\n".join(table)
    assert "EOCloverFBCGPU" in result.out  # names lose their parameter lists first, not their ends
    monkeypatch.delenv("COLUMNS")
    piped = cli("check", "--config", STENCIL / "perfcheck.toml", "--suite", "after", "--baseline-dir", tmp_path)
    assert "EOCloverFBCGPU(float*, float const*, int)" in piped.out  # a pipe: whole lines


def test_peaks_sources_fit(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    from conftest import profile

    log = profile("mixbench/pawsey-mulan-mi100/mixbench-log.txt")
    monkeypatch.setenv("COLUMNS", "80")
    result = cli("peaks", log)
    assert result.code == 0, result.err
    assert max(len(line) for line in result.out.splitlines()) <= 80
    assert "xbench-log.txt  single precision compute" in result.out  # the file name's end stays


def test_progress_counts_things_other_than_bytes() -> None:
    clock, out = _Clock(), _Tty()
    progress = Progress("writing the dashboard", total=41, unit="pages", stream=out, enabled=True, clock=clock)
    clock.now += 3
    progress.update(12)
    assert out.getvalue() == "\rperfcheck: writing the dashboard: 12 of 41 pages (29%), 3 s\x1b[K"


def test_the_dashboard_writes_no_progress_into_a_pipe(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    from dashboard_data import fill_store

    from perfcheck.cli import main

    store = fill_store(tmp_path / "h.sqlite", nights=4)
    assert main(["history", "report", "--history", str(store), "--html", str(tmp_path / "site")]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and "writing the dashboard" not in err
