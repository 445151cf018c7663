"""`perfcheck history report` and `perfcheck history export`: the thin faces over
the dashboard and the exports, and their one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import one_line_error
from dashboard_data import NIGHTS, START, STEP_AT, commit, fill_store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fill_store(tmp_path_factory.mktemp("history") / "history.sqlite")


def test_report_writes_the_site_and_the_digest(cli, store: Path, tmp_path: Path) -> None:  # noqa: ANN001
    result = cli("history", "report", "--history", store, "--html", tmp_path / "site",
                 "--markdown", tmp_path / "nightly.md", "--link", "https://perf.example/")
    assert result.code == 0, result.err
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "site").iterdir()) == ["index.html", "suite", "suite"]
    digest = (tmp_path / "nightly.md").read_text()
    assert "**1 open regression**" in digest and commit(STEP_AT)[:12] in digest
    assert "Charts: https://perf.example/" in digest
    assert "dashboard:" in result.err and "digest:" in result.err


def test_report_narrowed_to_a_suite_and_the_last_runs(cli, store: Path, tmp_path: Path) -> None:  # noqa: ANN001
    result = cli("history", "report", "--history", store, "--html", tmp_path, "--suite", "cpu", "--last", "5")
    assert result.code == 0, result.err
    pages = sorted(p.name for p in tmp_path.glob("*.html"))
    assert len(pages) == 2 and pages[1].startswith("suite-cpu")
    assert "5 runs" in (tmp_path / "index.html").read_text()


def test_export_every_format(cli, store: Path, tmp_path: Path) -> None:  # noqa: ANN001
    result = cli("history", "export", "--history", store, "--bencher", tmp_path / "bencher",
                 "--openmetrics", tmp_path / "om.txt", "--prometheus", tmp_path / "prom.txt")
    assert result.code == 0, result.err
    assert len(json.loads((tmp_path / "bencher" / "manifest.json").read_text())) == NIGHTS
    assert (tmp_path / "om.txt").read_text().endswith("# EOF\n")
    assert f" {int(START * 1000)}\n" in (tmp_path / "prom.txt").read_text()
    since = cli("history", "export", "--history", store, "--bencher", tmp_path / "recent", "--since", "2026-10-15")
    assert since.code == 0, since.err
    assert 0 < len(json.loads((tmp_path / "recent" / "manifest.json").read_text())) < NIGHTS


def test_errors_are_one_line(cli, store: Path, tmp_path: Path) -> None:  # noqa: ANN001
    missing = tmp_path / "absent.sqlite"
    one_line_error(cli("history", "report", "--history", missing, "--html", tmp_path / "s"), missing, "no such history store")
    assert not missing.exists()  # a report never creates a store
    one_line_error(cli("history", "report", "--history", store), None, "--html DIR")
    one_line_error(cli("history", "export", "--history", store), None, "--bencher DIR")
    one_line_error(cli("history", "export", "--history", store, "--bencher", tmp_path, "--since", "yesterday"),
                   None, "--since")
    not_a_store = tmp_path / "results.csv"
    not_a_store.write_text("a,b\n1,2\n")
    one_line_error(cli("history", "report", "--history", not_a_store, "--html", tmp_path / "s"), not_a_store)


def test_a_small_store_gives_the_pages_of_the_whole_view(cli, store: Path, tmp_path: Path) -> None:  # noqa: ANN001
    """The report is written part by part now (perfcheck.history.site); a store this small
    keeps one page per suite with every chart, byte for byte the pages of the whole view."""
    from perfcheck.history import open_store
    from perfcheck.history.dashboard import history_view_of, markdown_digest, write_site

    result = cli("history", "report", "--history", store, "--html", tmp_path / "site", "--markdown",
                 tmp_path / "digest.md", "--accepted", tmp_path / "none.toml")
    assert result.code == 0, result.err
    with open_store(store, create=False) as opened:
        view = history_view_of(opened.series(), arches={s: f.get("arch", "") for s, f in opened.machines().items()})
    expected = write_site(view, tmp_path / "whole")
    assert sorted(p.name for p in (tmp_path / "site").iterdir()) == sorted(p.name for p in expected)
    for page in expected:
        assert (tmp_path / "site" / page.name).read_text() == page.read_text(), page.name
    assert (tmp_path / "digest.md").read_text() == markdown_digest(view)


def test_the_digest_in_the_site_folder_is_written_with_it_night_after_night(cli, store: Path, tmp_path: Path) -> None:  # noqa: ANN001
    """examples/slurm/nightly.sbatch: --html REPORT --markdown REPORT/nightly.md, every night."""
    site = tmp_path / "report"
    for _ in range(2):  # the second night replaces a site that holds the digest
        result = cli("history", "report", "--history", store, "--html", site, "--markdown", site / "nightly.md")
        assert result.code == 0, result.err
        assert "**1 open regression**" in (site / "nightly.md").read_text()
    assert sorted(p.name.split("-")[0] for p in site.iterdir()) == ["index.html", "nightly.md", "suite", "suite"]


def _hidden(*folders: Path) -> list[str]:
    """What a write left beside its target: temporary files and folders (``.NAME.PID.X.tmp``)."""
    return sorted(p.name for folder in folders for p in folder.iterdir() if p.name.startswith("."))


def test_a_site_folder_given_as_a_link_stays_a_link(cli, store: Path, tmp_path: Path) -> None:  # noqa: ANN001
    # `--html site` where site links to the folder a web server publishes: the site is
    # built beside the folder the link names and renamed onto it, so the link stays
    # (before: renamed onto the link, the link became a folder and the served one kept
    # the old pages; into an empty folder, the rename failed, exit 2)
    served = tmp_path / "www" / "perf"
    served.mkdir(parents=True)
    link = tmp_path / "site"
    link.symlink_to(served, target_is_directory=True)
    for round in range(2):  # into the empty folder, then over the site written before
        result = cli("history", "report", "--history", store, "--html", link, "--markdown", link / "nightly.md")
        assert result.code == 0, result.err
        assert link.is_symlink() and link.resolve() == served.resolve(), round
        assert sorted(p.name.split("-")[0] for p in served.iterdir()) == ["index.html", "nightly.md", "suite", "suite"]
        assert f"dashboard: {link / 'index.html'}" in result.err
        assert _hidden(tmp_path, served.parent) == []  # nothing half-built left beside the link or the folder
    (served / "index.html").write_text("old")
    chained = tmp_path / "again"  # a link to the link
    chained.symlink_to(link, target_is_directory=True)
    assert cli("history", "report", "--history", store, "--html", chained, "--markdown", chained / "nightly.md").code == 0
    assert chained.is_symlink() and link.is_symlink() and (served / "index.html").read_text() != "old"


def test_an_export_file_given_as_a_link_stays_a_link(cli, store: Path, tmp_path: Path) -> None:  # noqa: ANN001
    # the same for the text exports (every file perfcheck writes goes through write_atomic):
    # the file the link names is replaced, beside it, and the link kept (before: the link
    # itself was replaced by a file, and the file it named kept the old export)
    shared = tmp_path / "scrape"
    shared.mkdir()
    (shared / "perf.om").write_text("old")
    link = tmp_path / "m.om"
    link.symlink_to(shared / "perf.om")
    result = cli("history", "export", "--history", store, "--openmetrics", link, "--prometheus", tmp_path / "p.txt")
    assert result.code == 0, result.err
    assert link.is_symlink() and link.resolve() == (shared / "perf.om").resolve()
    text = (shared / "perf.om").read_text()
    assert text.startswith("# ") and text.endswith("# EOF\n")
    assert _hidden(tmp_path, shared) == []
    dangling = tmp_path / "next.om"  # a link to a file not yet written: written where it points
    dangling.symlink_to(shared / "next.om")
    assert cli("history", "export", "--history", store, "--openmetrics", dangling).code == 0
    assert dangling.is_symlink() and (shared / "next.om").read_text() == text
    loop = tmp_path / "loop.om"
    loop.symlink_to(tmp_path / "loop.om")
    one_line_error(cli("history", "export", "--history", store, "--openmetrics", loop), None, str(loop), "cannot write")
    assert loop.is_symlink()
    nowhere = tmp_path / "gone.om"  # a link into a folder that is not there: said of the link
    nowhere.symlink_to(tmp_path / "no" / "such" / "perf.om")
    result = cli("history", "export", "--history", store, "--openmetrics", nowhere)
    one_line_error(result, None, str(nowhere), "cannot write", "the link points into")
    assert ".tmp" not in result.err


def test_a_site_folder_given_as_a_loop_of_links_is_a_one_line_error(cli, store: Path, tmp_path: Path) -> None:  # noqa: ANN001
    # Path.resolve() raised RuntimeError on a loop (exit 3, "internal error")
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to(b, target_is_directory=True)
    b.symlink_to(a, target_is_directory=True)
    result = cli("history", "report", "--history", store, "--html", a)
    assert result.code == 2, result.err
    assert len(result.err.strip().splitlines()) == 1 and str(a) in result.err and "cannot be written" in result.err
    assert a.is_symlink() and b.is_symlink()
