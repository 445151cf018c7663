"""pytest plugin entry point.

Start-up must stay light: nothing here imports pandas or perfcheck's readers;
they are imported only when a perf test actually runs.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("perfcheck", "GPU kernel performance checks (perfcheck)")
    group.addoption(
        "--perf",
        action="store_true",
        default=False,
        help="run tests marked 'perf' (performance expectations); without it they are skipped",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "perf: a GPU kernel performance test, run only with --perf")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--perf"):
        return
    skip = pytest.mark.skip(reason="performance test: run with --perf")
    for item in items:
        if item.get_closest_marker("perf") is not None:
            item.add_marker(skip)
