"""Holistic Trace Analysis (``pip install holistictraceanalysis``) as the oracle of
the timeline metrics: its temporal breakdown, communication-computation overlap and
GPU kernel breakdown of one Kineto trace, unrounded, in percent.

HTA is in the ``test`` extra (the brief's oracle for timeline breakdowns; it pulls in
JupyterLab, which costs CI about a minute of install). The figures it gave are also
recorded in tests/test_timeline_metrics.py, so the comparison holds where it is not
installed; the live tests skip there. Run this file to print them again:

    python tests/hta_oracle.py TRACE.json[.gz] ...

Conventions set here, from HTA's source: ``HTA_DISABLE_NS_ROUNDING=1`` (else it
rounds float µs timestamps to whole µs); ``cuda_sync`` events are removed from the
copy of the trace it reads (HTA counts host waits as GPU events, perfcheck does not).
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import sys
import tempfile
import warnings
from pathlib import Path


def hta_figures(trace: Path) -> dict[str, float]:
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis

    data = trace.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = json.loads(data)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "cuda_sync"]
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "trace.json").write_text(json.dumps(doc))
        analysis = TraceAnalysis(trace_dir=folder)
        temporal = analysis.get_temporal_breakdown(visualize=False).iloc[0]
        overlap = analysis.get_comm_comp_overlap(visualize=False).iloc[0]
        kinds, _ = analysis.get_gpu_kernel_breakdown(visualize=False)
    span = temporal["kernel_time(us)"]
    figures = {
        "span_us": float(span),
        "idle_pct": 100.0 * temporal["idle_time(us)"] / span,
        "compute_pct": 100.0 * temporal["compute_time(us)"] / span,
        "non_compute_pct": 100.0 * temporal["non_compute_time(us)"] / span,
        "comm_overlap_pct": float(overlap["comp_comm_overlap_pctg"]),  # HTA returns it rounded to 0.01
    }
    for _, row in kinds.iterrows():
        figures[f"breakdown_{row['kernel_type']}_pct"] = float(row["percentage"])
    return figures


if __name__ == "__main__":
    from importlib.metadata import version

    print(f"HTA {version('holistictraceanalysis')}")
    for name in sys.argv[1:]:
        print(name, json.dumps(hta_figures(Path(name)), indent=1))
