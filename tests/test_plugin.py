"""The pytest plugin registers through its entry point and stays light at start-up."""

from __future__ import annotations

import subprocess
import sys

pytest_plugins = ["pytester"]


def test_perf_tests_skip_without_flag(pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.perf
        def test_fast_kernel():
            assert True

        def test_plain():
            assert True
        """
    )
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*run with --perf*"])
    result = pytester.runpytest("--perf")
    result.assert_outcomes(passed=2)


def test_option_in_help(pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--perf*"])


def test_plugin_import_is_light() -> None:
    code = "import sys, pytest_perfcheck.plugin; print('pandas' in sys.modules, 'perfcheck.ingest' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]
