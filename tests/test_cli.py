"""CLI behaviour that does not depend on a particular reader."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import one_line_error

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


def test_no_command_prints_help() -> None:
    result = subprocess.run([sys.executable, "-m", "perfcheck"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "inspect" in result.stdout


def test_text_table(cli) -> None:
    result = cli("inspect", EXAMPLE)
    assert result.code == 0
    assert "EOCloverFBCGPU" in result.out
    assert "median" in result.out and "2.6" in result.out
