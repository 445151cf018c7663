"""Small things users hit (issue 10, section 6; issue 8, terminal output): each with
the command a user ran."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import profile
from perfcheck.model import FAILED, Check
from perfcheck.report.text import checks_table, printable, problems

ROOT = Path(__file__).resolve().parent.parent
STENCIL = ROOT / "examples" / "stencil"


def test_inspect_kernel_pattern(cli) -> None:
    result = cli("inspect", STENCIL / "results-before.csv", "--kernel", "*Dag*")
    assert result.code == 0
    rows = [line for line in result.out.splitlines() if "CloverDag" in line]
    assert rows and not any("CloverFBCGPU" in line and "Dag" not in line for line in result.out.splitlines())
    doc = cli("inspect", STENCIL / "results-before.csv", "--kernel", "re:^EO", "--json").json()
    assert sorted(k["kernel"][:2] for k in doc["kernels"]) == ["EO", "EO"]
    bad = cli("inspect", STENCIL / "results-before.csv", "--kernel", "Dag")
    assert bad.code == 2 and bad.err.count("\n") == 1 and "matched no kernel of 5" in bad.err and "'*Dag*' matches 2 kernels" in bad.err


def test_full_kernel_names_when_not_a_terminal(cli) -> None:
    """mixbench under Omniperf: 66 kernels whose names differ only past 60 characters."""
    path = profile("omniperf/omniperf-v1-TCC-mi200")
    result = cli("inspect", path)  # captured: not a terminal
    assert result.code == 0
    table = result.out.split("\n\n")[1].splitlines()[2:]
    names = [line.split("  ")[0] for line in table]
    assert len(names) > 60 and len(set(names)) == len(names)
    assert not any(name.endswith("...") for name in names)


def test_run_help_shows_percent_once() -> None:
    done = subprocess.run([sys.executable, "-m", "perfcheck.cli", "run", "--help"], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 0 and "%%" not in done.stdout and "80%" in done.stdout.replace("\n", " ")


def test_arch_list_help_has_a_description() -> None:
    done = subprocess.run([sys.executable, "-m", "perfcheck.cli", "arch", "list", "--help"], capture_output=True,
                          text=True, cwd=ROOT)
    assert "device names" in done.stdout


def test_config_directory(cli, tmp_path: Path) -> None:
    ok = cli("check", "--config", STENCIL, "--suite", "after", "--baseline-dir", STENCIL / "baselines")
    assert ok.code == 0, ok.err
    empty = cli("check", "--config", tmp_path)
    assert empty.code == 2 and "is a directory without perfcheck.toml or pyproject.toml" in empty.err
    assert "'peaks'" not in empty.err


def test_occupancy_block_too_large_is_an_error(cli) -> None:
    result = cli("occupancy", "--arch", "mi100", "--block", "2048", "--vgpr", "32")
    assert result.code == 2 and result.err == "perfcheck: error: --block 2048: a workgroup/block on gfx908 holds 1 to 1024 threads\n"
    assert cli("occupancy", "--arch", "a100", "--block", "0", "--registers", "32").code == 2
    assert cli("occupancy", "--arch", "mi100", "--block", "1024", "--vgpr", "32").code == 0


def test_inspect_a_peaks_file_says_where_it_belongs(cli) -> None:
    result = cli("inspect", STENCIL / "machines" / "mulan-mi100.toml")
    assert result.code == 2 and "use `perfcheck peaks` or `peaks =` in the config" in result.err
    mixbench = profile("mixbench/pawsey-mulan-mi100/mixbench-log.txt")
    result = cli("inspect", mixbench)
    assert result.code == 2 and "this is a mixbench log" in result.err and "`perfcheck peaks`" in result.err
    back = cli("peaks", STENCIL / "results-before.csv")
    assert back.code == 2 and "`perfcheck inspect`" in back.err


HOSTILE = "evil\x1b]0;pwned\x07\x1b[2J\rkernel\x9b31m\u202e"


def test_terminal_output_strips_escape_and_control_characters() -> None:
    check = Check("s\x1b[1m", HOSTILE, "*", "duration <= 1 ms", "duration", "<=", 0.002, 0.001, "s", FAILED,
                  "expectation", f"{HOSTILE} took 2 ms")
    lines = [*checks_table([check], kernel_width=200), *problems([check])]
    for line in lines:
        assert not any(ord(ch) < 32 or 0x7f <= ord(ch) <= 0x9f or ch == "\u202e" for ch in line), repr(line)
    assert "\\x1b" in lines[2] and "\\x1b" in lines[3]
    assert printable("a\tb\nc") == "a\\tb\\nc"
    assert printable("void k<int>(float*)") == "void k<int>(float*)"


def test_source_line_names_an_arch_without_a_device_plainly() -> None:
    from perfcheck.model import Source
    from perfcheck.report.text import describe_sources

    lines = describe_sources([Source("a.hatchet", "proton", "proton", arch="sm_90"),
                              Source("b.json", "kineto", "kineto", "schema 1", device="NVIDIA H100", arch="sm_90", rank=0)])
    assert lines.splitlines() == ["a.hatchet: proton, sm_90",
                                  "b.json: kineto, version schema 1, NVIDIA H100 (sm_90), rank 0"]


def test_baseline_update_lines_escape_control_characters() -> None:
    """The old -> new account of a baseline update printed kernel names as they were:
    an ESC in a name reached the terminal."""
    from pathlib import Path
    from types import SimpleNamespace

    from perfcheck.baseline import KernelChange
    from perfcheck.report.text import baseline_lines

    suite = SimpleNamespace(action="updated", baseline_path=Path("b.json"), name="s",
                            changes=[KernelChange("k\x1b[31m", "added")])
    lines = baseline_lines(SimpleNamespace(suites=[suite]))
    assert lines[1] == "  k\\x1b[31m: added" and "\x1b" not in "".join(lines)
