"""CLI behaviour that does not depend on a particular reader."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import one_line_error
from perfcheck.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "stencil" / "kernel_trace.csv"




def test_help_lists_commands(cli) -> None:
    result = subprocess.run([sys.executable, "-m", "perfcheck", "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    for command in ("inspect", "peaks", "formats"):
        assert command in result.stdout


def test_formats_lists_readers(cli) -> None:
    result = cli("formats")
    assert result.code == 0
    assert "rocprofv3-kernel-trace" in result.out
    assert "profile" in result.out


def test_missing_file(cli) -> None:
    line = one_line_error(cli("inspect", "no/such/file.csv"))
    assert "no/such/file.csv" in line and "no such file" in line


def test_empty_file(cli, tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    line = one_line_error(cli("inspect", empty))
    assert str(empty) in line and "empty" in line


def test_unknown_format_lists_what_was_tried(cli, tmp_path: Path) -> None:
    odd = tmp_path / "notes.txt"
    odd.write_text("just some notes\nnothing to see\n")
    line = one_line_error(cli("inspect", odd))
    assert "tried:" in line and "rocprofv3-kernel-trace" in line and "--format" in line


def test_binary_garbage(cli, tmp_path: Path) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 8)
    line = one_line_error(cli("inspect", junk))
    assert str(junk) in line


def test_unknown_format_name(cli) -> None:
    line = one_line_error(cli("inspect", EXAMPLE, "--format", "nope"))
    assert "unknown format 'nope'" in line and "rocprofv3-kernel-trace" in line


def test_wrong_format_named(cli) -> None:
    # A kernel trace is not a peaks file: the peaks readers all refuse it.
    line = one_line_error(cli("peaks", EXAMPLE))
    assert "not a peaks file" in line and "`perfcheck inspect`" in line


def test_usage_error_exit_code() -> None:
    result = subprocess.run([sys.executable, "-m", "perfcheck", "inspect"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr == ("perfcheck: error: the following arguments are required: PATH; "
                             "see `perfcheck inspect --help`\n")


@pytest.mark.parametrize(("argv", "what", "command"), [
    (["bogus"], "argument COMMAND: invalid choice: 'bogus'", "perfcheck"),
    (["inspect", "--bogus", "x.csv"], "unrecognized arguments: --bogus", "perfcheck inspect"),
    (["check", "--arch"], "argument --arch: expected one argument", "perfcheck check"),
    (["occupancy", "--block", "abc"], "argument --block: invalid int value: 'abc'", "perfcheck occupancy"),
    (["run", "--profiler", "foo"], "argument --profiler: invalid choice: 'foo'", "perfcheck run"),
    (["history"], "the following arguments are required: ACTION", "perfcheck history"),
    (["history", "detect", "--nope"], "unrecognized arguments: --nope", "perfcheck history detect"),
    (["history", "add"], "the following arguments are required: RESULTS.json", "perfcheck history add"),
    (["baseline", "update", "--zzz"], "unrecognized arguments: --zzz", "perfcheck baseline update"),
    (["arch", "show"], "the following arguments are required: NAME", "perfcheck arch show"),
    (["peaks", "measure", "--size", "12x"], "argument --size: expected bytes", "perfcheck peaks measure"),
])
def test_usage_errors_are_one_line_naming_the_commands_help(capsys: pytest.CaptureFixture[str], argv: list[str],
                                                            what: str, command: str) -> None:
    """argparse printed its usage block (a screenful for `check`) above the error; now
    the error alone, and which --help to read. Unknown options are told against the
    subcommand they were given to, not the top-level parser argparse reports them on."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(f"perfcheck: error: {what}") and line.endswith(f"; see `{command} --help`"), line


def test_no_command_prints_help() -> None:
    result = subprocess.run([sys.executable, "-m", "perfcheck"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "inspect" in result.stdout


def test_text_table(cli) -> None:
    result = cli("inspect", EXAMPLE)
    assert result.code == 0
    assert "EOCloverFBCGPU" in result.out
    assert "median" in result.out and "2.6" in result.out
