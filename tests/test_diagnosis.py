"""perfcheck.diagnosis: why a kernel changed, from what else moved.

The two levels of the stencil example (examples/stencil: the register version
"after" and the LDS version "before", rocprof traces the project generates itself)
are the real case: going from registers back to LDS halves the occupancy (limiter
vgpr -> lds) with the same bytes moved."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfcheck.diagnosis import TIME_ONLY, diagnose, limiter, moved

STENCIL = Path(__file__).resolve().parent.parent / "examples" / "stencil"
KERNEL = "EOCloverFBCGPU(float*, float const*, int)"


@pytest.fixture(scope="module")
def levels() -> tuple[dict[str, float], dict[str, float]]:
    """(register version, LDS version) measurements of one kernel, as the store keeps them."""
    from perfcheck.analysis import analyse
    from perfcheck.history.runs import measurements

    registers = measurements(analyse([STENCIL / "results-after.csv"], arch="mi100"))[KERNEL]
    lds = measurements(analyse([STENCIL / "results-before.csv"], arch="mi100"))[KERNEL]
    return registers, lds


def test_registers_to_lds_names_occupancy_limiter_and_lds(levels) -> None:
    registers, lds = levels
    found = diagnose(registers, lds, arch="gfx908")
    text = found.text()
    assert text.startswith("duration +")
    # the largest effect first: the occupancy halved, by LDS, with the same bytes
    first = found.items[0]
    assert first.startswith("occupancy 40.0% -> 20.0% (limiter vgpr -> lds; lds_per_workgroup 0 B -> 24 KiB")
    assert "hbm_bytes unchanged" in text
    assert "hbm_bw 74.5% -> 39.3% of peak" in text  # of the datasheet peak: no machine file given
    assert not found.time_only
    assert {m.metric for m in found.moved} >= {"occupancy_pct", "lds_per_workgroup", "vgpr", "occupancy_limiter"}


def test_the_reverse_is_an_improvement_with_the_limiter_back_to_vgpr(levels) -> None:
    registers, lds = levels
    text = diagnose(lds, registers, arch="mi100").text()
    assert text.startswith("duration -")
    assert "limiter lds -> vgpr" in text


def test_without_an_arch_the_given_labels_are_used(levels) -> None:
    registers, lds = levels
    text = diagnose(registers, lds, labels_before={"occupancy_limiter": "vgpr"},
                    labels_after={"occupancy_limiter": "lds"}).text()
    assert "limiter vgpr -> lds" in text
    assert "limiter" not in diagnose(registers, lds).text()  # nothing to derive it from: not guessed


def test_time_only_when_no_counter_moved(levels) -> None:
    registers, _ = levels
    slower = {**registers, "duration": registers["duration"] * 1.3, "hbm_bw": registers["hbm_bw"] / 1.3,
              "hbm_bw_pct": registers["hbm_bw_pct"] / 1.3}
    found = diagnose(registers, slower, arch="gfx908")
    assert found.time_only
    assert found.text() == f"duration +30.0%: {TIME_ONLY}"
    assert diagnose(registers, slower, whole_run_pct=28.0).text() == \
        f"duration +30.0%: whole run moved (+28.0%, every kernel); {TIME_ONLY}"


def test_largest_effect_first_and_bytes_named() -> None:
    before = {"duration": [1.0e-3] * 5, "hbm_bytes": [1.0e9] * 5, "instructions": [1.0e6] * 5}
    after = {"duration": [1.5e-3] * 5, "hbm_bytes": [1.45e9] * 5, "instructions": [2.0e6] * 5}
    found = diagnose(before, after)
    assert found.items[:2] == ("instructions 1,000,000 -> 2,000,000", "hbm_bytes 953.7 MiB -> 1.35 GiB")


def test_a_change_within_its_own_noise_is_not_named() -> None:
    noisy = [1.00e9, 1.10e9, 0.92e9, 1.05e9, 0.97e9]
    assert moved("hbm_bytes", noisy, [v * 1.06 for v in noisy]) is None  # 6% inside +-6% run-to-run
    assert moved("hbm_bytes", [1e9] * 5, [1.06e9] * 5) is not None  # the same 6% on a steady counter
    assert moved("hbm_bytes", 1e9, 1.01e9) is None  # one value a side: 1% is below MIN_CHANGE
    assert moved("hbm_bw", 1e9, 0.9e9, noise=0.05) is None  # the caller's noise: 10% < 3 x 5%
    assert moved("vgpr", 64, 65) is not None  # resources are exact


def test_limiter_needs_a_known_arch() -> None:
    resources = {"vgpr": 64, "sgpr": 64, "lds_per_workgroup": 0, "workgroup_size": 256}
    assert limiter(resources, "gfx908") == "vgpr"
    assert limiter(resources, None) is None
    assert limiter(resources, "no-such-gpu") is None


def test_the_binding_roof_from_the_numbers_matches_the_analysis(levels) -> None:
    from perfcheck.analysis import analyse
    from perfcheck.diagnosis import roof_labels

    registers, _ = levels
    table = analyse([STENCIL / "results-after.csv"], arch="mi100").kernels
    row = table[table["kernel"] == KERNEL].iloc[0]
    assert roof_labels(registers) == {"bound": row["bound"], "roofline_ceiling": row["roofline_ceiling"]}
    assert roof_labels({"duration": 1.0}) == {}


def test_a_change_of_binding_roof_is_named() -> None:
    # hbm roof 1 x 1e12 binds at first; then the kernel works out of L2 at a lower
    # intensity there: the L2 roof (0.5 x 1.6e12 = 8e11) binds
    common = {"hbm_bw": 5e11, "hbm_bw_pct": 50.0, "l2_bw": 8e11, "l2_bw_pct": 50.0, "duration": 1e-3}
    before = {**common, "ai_hbm": 1.0, "ai_l2": 2.0, "attainable": 1e12}
    after = {**common, "ai_hbm": 1.0, "ai_l2": 0.5, "attainable": 8e11, "duration": 1.2e-3}
    text = diagnose(before, after).text()
    assert "binding roof hbm_bw -> l2_bw" in text
    compute = {**before, "attainable": 4e11}  # below every memory roof: the flat roof binds
    assert "binding roof compute -> hbm_bw (bound compute -> memory)" in diagnose(compute, before).text()


def test_the_subject_is_never_called_unchanged() -> None:
    before = {"hbm_bytes": 1e9, "vgpr": 64, "duration": 1e-3}
    after = {"hbm_bytes": 1.5e9, "vgpr": 80, "duration": 1e-3}
    text = diagnose(before, after, subject="hbm_bytes").text()
    assert text == "hbm_bytes +50.0%: vgpr 64 -> 80"


def test_a_count_that_moved_alone_is_not_called_time_only() -> None:
    from perfcheck.diagnosis import NOTHING_ELSE, timed

    assert diagnose({"hbm_bytes": 1e9, "vgpr": 64}, {"hbm_bytes": 1.5e9, "vgpr": 64},
                    subject="hbm_bytes").text() == f"hbm_bytes +50.0%: {NOTHING_ELSE}"
    assert [m for m in ("duration_max", "hbm_bw", "hbm_bw_pct", "gips", "gips_pct", "roofline_pct", "flop_rate",
                        "instruction_rate", "hbm_bytes", "occupancy_pct", "vgpr", "calls") if timed(m)] == \
        ["duration_max", "hbm_bw", "hbm_bw_pct", "gips", "gips_pct", "roofline_pct", "flop_rate", "instruction_rate"]


def test_limiters_from_one_table_are_limiter_of_each() -> None:
    # history detect derives the limiter of thousands of sides at once: each as limiter() says
    import numpy as np

    from perfcheck.diagnosis import RESOURCES, limiters

    rng = np.random.default_rng(5)
    sides = [{k: float(rng.choice([0, 1, 16, 24, 32, 48, 64, 100.5, 128, 256, 1024, 24576, 65536, 1e6]))
              for k in RESOURCES if rng.random() < 0.7} for _ in range(300)] + [{}]
    for arch in ("gfx90a", "gfx908", "sm_90", "A100", "no-such-gpu", None):
        assert limiters(sides, arch) == [limiter(side, arch) for side in sides]


def test_diagnose_many_is_diagnose_of_each(levels) -> None:  # noqa: ANN001
    # the bulk form (history detect's) with the whole run added after: the same diagnoses
    import numpy as np

    from perfcheck.diagnosis import Sides, diagnose_many, with_whole_run

    registers, lds = levels
    rng = np.random.default_rng(2)

    def runs(values: dict[str, float], n: int, noise: float) -> dict[str, np.ndarray]:
        return {k: v * np.exp(rng.normal(0.0, noise, n)) for k, v in values.items() if isinstance(v, float)}

    quiet = {"duration": 1e-3, "hbm_bytes": 1e6}
    timeline = {"span": 1.0, "idle": 0.1, "steps": 10.0}
    cases = [Sides(runs(registers, 5, 0.01), runs(lds, 5, 0.01), arch="mi100"),
             Sides(runs(lds, 3, 0.0), runs(registers, 4, 0.0), arch="gfx90a", subject="hbm_bw"),
             Sides(runs(quiet, 6, 0.005), runs({**quiet, "duration": 1.3e-3}, 6, 0.005), arch="mi100"),
             Sides(runs(timeline, 4, 0.01), runs({**timeline, "idle": 0.3}, 4, 0.01), subject="span"),
             Sides(runs(registers, 5, 0.01), runs(registers, 5, 0.01), arch=None),
             # a failed check's: one run after, with its labels and within-run noise
             Sides(runs(registers, 5, 0.01), runs(lds, 1, 0.0), arch="mi100", noise={"duration": 0.02, "vgpr": 0.02},
                   labels_after={"occupancy_limiter": "lds", "bound": "memory", "roofline_ceiling": "hbm_bw"}),
             Sides(runs(quiet, 1, 0.0), runs({**quiet, "hbm_bytes": 1.02e6}, 1, 0.0), arch="mi100",
                   noise={"hbm_bytes": 0.05}, labels_before={"occupancy_limiter": "vgpr"})]
    for whole in (None, 12.5):
        many = [with_whole_run(d, whole) for d in diagnose_many(cases)]
        one = [diagnose(c.before, c.after, subject=c.subject, arch=c.arch, whole_run_pct=whole, noise=c.noise,
                        labels_before=c.labels_before, labels_after=c.labels_after) for c in cases]
        assert [d.as_dict() for d in many] == [d.as_dict() for d in one]
    assert "limiter" in one[0].text() and one[2].time_only and one[2].items[0].startswith("whole run moved")


def test_side_summaries_in_stacks_are_those_of_each_side_alone() -> None:
    # medians and spreads of many sides at once (history detect's), to the bit
    import numpy as np

    from perfcheck.diagnosis import _finite, _spread, _summaries

    rng = np.random.default_rng(9)
    sides = [{m: np.exp(rng.normal(0.0, float(rng.choice([0.0, 0.02, 0.3])), int(rng.integers(0, 9))))
              * 10.0 ** int(rng.integers(-9, 12)) for m in ("duration", "vgpr", "hbm_bytes")} for _ in range(400)]
    sides += [{"duration": 1.5, "calls": [np.nan, 2.0], "neg": [-1.0, 2.0, 3.0], "none": [np.nan]}, {},
              {"inf": [np.inf, 1.0, -np.inf, 4.0], "missing": None, "empty": [], "grid": [[1.0, 2.0], [np.nan, 8.0]]}]
    for side, summary in zip(sides, _summaries(sides)):
        alone = {m: (float(np.median(_finite(v))), _spread(_finite(v))) for m, v in side.items() if len(_finite(v))}
        assert summary == alone and list(summary) == list(alone)
