"""A small history for the dashboard and export tests: nightly runs written into a
real store through its public API, with one known regression and one known
improvement, and a parser that turns the dashboard's HTML into elements."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import numpy as np

from perfcheck.history import Result, RunRecord, open_store

NIGHTS = 30
STEP_AT = 20  # the first night at the slower level
START = 1_790_000_000.0  # 2026-09-21 (Unix seconds), 02:13 UTC
STENCIL = "void EOCloverFBCGPU<double>(double const*, double*, int, int)"
COPY = "stream_copy(double const*, double*)"
MACHINE = "mi100_gfx908_rocprofv3-1.0.0"


def commit(night: int) -> str:
    return hashlib.sha1(f"night {night}".encode()).hexdigest()


def fill_store(path: Path, nights: int = NIGHTS, *, seed: int = 7) -> Path:
    """``nights`` nightly runs of two suites: the stencil kernel's duration 12%
    slower from night ``STEP_AT`` on (a regression), its bandwidth 10% higher from
    night 12 on (an improvement); the copy kernel flat; 1% noise."""
    rng = np.random.default_rng(seed)
    with open_store(path) as store:
        for night in range(nights):
            noise = 1.0 + 0.01 * rng.standard_normal(3)
            duration = 2.67e-3 * (1.12 if night >= STEP_AT else 1.0) * noise[0]
            bandwidth = 9.0e11 * (1.10 if night >= 12 else 1.0) * noise[1]
            copy = 1.2e-3 * noise[2]
            run = RunRecord(run_id=f"run-{night:03d}", time=START + night * 86400.0, commit=commit(night),
                            branch="main", ci_system="slurm", ci_job=str(1000 + night))
            store.add(run, [
                Result(MACHINE, "stencil", STENCIL, "duration", duration, "s", n=20, median=duration, spread=0.01),
                Result(MACHINE, "stencil", STENCIL, "hbm_bw", bandwidth, "B/s"),
                Result(MACHINE, "stencil", COPY, "duration", copy, "s", n=10, median=copy, spread=0.02),
                Result(MACHINE, "cpu", "copyto", "mem_bw", 1.2e10 * noise[2], "B/s"),
            ])
    return path


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    parents: tuple[str, ...]
    text: str = ""
    classes: set[str] = field(default_factory=set)


class Page(HTMLParser):
    """Every element of a page with its attributes, its ancestors' tags and the text
    directly inside it (enough to find tables, charts and links)."""

    VOID = {"meta", "link", "br", "img", "input", "hr", "area", "base", "col", "source", "wbr"}

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self._stack: list[Element] = []
        self.doctype = ""
        self.feed(text)
        self.close()

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        element = Element(tag, attributes, tuple(e.tag for e in self._stack),
                          classes=set(attributes.get("class", "").split()))
        self.elements.append(element)
        if tag not in self.VOID:
            self._stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID:
            self._stack.pop()

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._stack) - 1, -1, -1):
            if self._stack[i].tag == tag:
                del self._stack[i:]
                return
        raise AssertionError(f"closing </{tag}> without an open one")

    def handle_data(self, data: str) -> None:
        if self._stack:
            self._stack[-1].text += data

    def find(self, tag: str, cls: str | None = None) -> list[Element]:
        return [e for e in self.elements if e.tag == tag and (cls is None or cls in e.classes)]
