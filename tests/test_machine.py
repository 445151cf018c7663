"""Machine files (perfcheck.machine, ingest format perfcheck-machine)."""

from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

import perfcheck.atomicfile as atomicfile
from conftest import profile
from perfcheck.errors import InputError, UsageError
from perfcheck.ingest import detect, read_peaks
from perfcheck.machine import Machine, dumps, machine_from_peaks, read_machine, write_machine
from perfcheck.model import PeakDetail, Peaks, Source

MIXBENCH_MI100 = "mixbench/pawsey-mulan-mi100/mixbench-log.txt"
BABELSTREAM_MI300A = "babelstream/mi300a-cpx/device_0.txt"


@pytest.fixture
def archdb(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """The real arch database when present; otherwise a stand-in with lookup/detect
    for the two names these tests use (issue 3 part A is written in parallel)."""
    try:
        import perfcheck.arch as real

        return real
    except ImportError:
        pass

    @dataclass(frozen=True)
    class _Arch:
        name: str

    @dataclass(frozen=True)
    class _Device:
        name: str

    @dataclass(frozen=True)
    class _Target:
        arch: _Arch
        device: _Device | None

    known = {"mi100": _Target(_Arch("gfx908"), _Device("mi100")), "gfx90a": _Target(_Arch("gfx90a"), None),
             "amd instinct mi300a": _Target(_Arch("gfx942"), _Device("mi300a"))}

    def lookup(name: str) -> _Target:
        if name.lower() not in known:
            raise UsageError(f"unknown arch or device {name!r}")
        return known[name.lower()]

    def detect(sources):  # noqa: ANN001, ANN202
        for source in sources:
            if source.device and source.device.lower() in known:
                return known[source.device.lower()]
        return None

    fake = types.ModuleType("perfcheck.arch")
    fake.lookup, fake.detect = lookup, detect
    monkeypatch.setitem(sys.modules, "perfcheck.arch", fake)
    return fake


def _small() -> Machine:
    peaks = Peaks(
        values={"hbm_bw": 1075460000000.0, "flop_rate_fp32": 21988380000000.0},
        details=(PeakDetail("runs/mixbench-log.txt", "single precision bandwidth", 1075460000000.0, "B/s"),),
        sources=(Source(path="runs/mixbench-log.txt", format="mixbench", tool="mixbench"),),
    )
    return Machine(name="mulan", device="mi100", arch="gfx908", peaks=peaks)


def test_file_text_is_sorted_versioned_and_commented() -> None:
    assert dumps(_small()) == (
        "# perfcheck machine file: empirical peaks measured on one machine.\n"
        "# Written by `perfcheck peaks --save`; values in base units. Use it with --peaks.\n"
        "format_version = 1\n"
        "\n"
        "[machine]\n"
        'arch = "gfx908"\n'
        'created-by = "perfcheck peaks"\n'
        'device = "mi100"\n'
        'name = "mulan"\n'
        "\n"
        "[peaks]\n"
        "flop_rate_fp32 = 21988380000000.0  # FLOP/s\n"
        "hbm_bw = 1075460000000.0  # B/s\n"
        "\n"
        "[[details]]\n"
        'name = "single precision bandwidth"\n'
        'source = "runs/mixbench-log.txt"\n'
        'unit = "B/s"\n'
        "value = 1075460000000.0\n"
    )


def test_round_trip_of_the_real_mixbench_peaks(tmp_path: Path, archdb: types.ModuleType) -> None:
    peaks = read_peaks(profile(MIXBENCH_MI100))
    machine = machine_from_peaks("mulan", peaks, "MI100")
    assert (machine.name, machine.device, machine.arch) == ("mulan", "mi100", "gfx908")
    path = tmp_path / "baselines" / "machines" / "mulan.toml"  # directories are created
    write_machine(path, machine)
    back = read_machine(path)
    assert (back.name, back.device, back.arch, back.path) == ("mulan", "mi100", "gfx908", str(path))
    assert back.peaks.values == peaks.values  # bit-identical floats
    assert back.peaks.values["hbm_bw"] == 1075.46e9
    assert back.peaks.details == peaks.details
    assert back.peaks.sources == (
        Source(path=str(path), format="perfcheck-machine", tool="perfcheck", tool_version="1", device="mi100", arch="gfx908"),
    )
    # writing what was read gives the same bytes: a re-save shows no diff
    text = path.read_text()
    write_machine(path, back)
    assert path.read_text() == text
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def test_saved_sources_are_relative_to_the_machine_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:
    # a file meant to be committed names its sources as any checkout finds them
    project = tmp_path / "project"
    (project / "peaks").mkdir(parents=True)
    (project / "peaks" / "mixbench-log.txt").write_bytes(profile(MIXBENCH_MI100).read_bytes())
    monkeypatch.chdir(project)
    result = cli("peaks", project / "peaks" / "mixbench-log.txt", "--save", "baselines/machines/mulan.toml")
    assert result.code == 0, result.err
    text = (project / "baselines" / "machines" / "mulan.toml").read_text()
    assert 'source = "../../peaks/mixbench-log.txt"' in text and str(tmp_path) not in text
    # read back (from anywhere) the source names the file again; a re-save gives the same bytes
    monkeypatch.chdir(tmp_path)
    back = read_machine(project / "baselines" / "machines" / "mulan.toml")
    assert {d.source for d in back.peaks.details} == {str(project / "peaks" / "mixbench-log.txt")}
    write_machine(project / "baselines" / "machines" / "mulan.toml", back)
    assert (project / "baselines" / "machines" / "mulan.toml").read_text() == text
    # a source that is not a file (perfcheck peaks measure) is kept as it is
    measured = Peaks({"hbm_bw": 1e12}, (PeakDetail("perfcheck peaks measure (copy)", "copy", 1e12, "B/s"),), ())
    write_machine(tmp_path / "m.toml", Machine("m", None, None, measured))
    assert 'source = "perfcheck peaks measure (copy)"' in (tmp_path / "m.toml").read_text()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_device_from_the_peaks_files_themselves(archdb: types.ModuleType) -> None:
    peaks = read_peaks(profile(BABELSTREAM_MI300A))  # BabelStream prints "AMD Instinct MI300A"
    machine = machine_from_peaks("lumi-test", peaks)
    assert (machine.device, machine.arch) == ("mi300a", "gfx942")
    unknown = Peaks(values={"hbm_bw": 4.8e11}, details=(),
                    sources=(Source(path="x", format="babelstream", tool="babelstream", device="GeForce GTX 1080 Ti"),))
    # a device the database does not know is kept as the file spells it, with no arch
    assert machine_from_peaks("desk", unknown).device == "GeForce GTX 1080 Ti"
    assert machine_from_peaks("desk", unknown).arch is None


def test_an_arch_given_as_device_records_the_arch(archdb: types.ModuleType) -> None:
    machine = machine_from_peaks("node", _small().peaks, "gfx90a")
    assert (machine.device, machine.arch) == (None, "gfx90a")
    text = dumps(machine)
    assert "device =" not in text and 'arch = "gfx90a"' in text
    with pytest.raises(UsageError):
        machine_from_peaks("node", _small().peaks, "no-such-gpu")


def test_strings_are_escaped_and_round_trip(tmp_path: Path) -> None:
    odd = 'run "7" \\ tab\there\nnewline \x01 ünïcode'
    peaks = Peaks(values={"hbm_bw": 2.5e-05, "l2_bw": 1e16}, details=(PeakDetail(odd, odd, 3.0, "B/s"),), sources=())
    machine = Machine(name="odd name", device=None, arch=None, peaks=peaks)
    write_machine(tmp_path / "odd.toml", machine)
    back = read_machine(tmp_path / "odd.toml")
    assert back.peaks.details == peaks.details
    assert back.peaks.values == {"hbm_bw": 2.5e-05, "l2_bw": 1e16}
    assert (back.name, back.device, back.arch) == ("odd name", None, None)


# --- atomic writes ----------------------------------------------------------------


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_failed_write_leaves_the_old_file_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "mulan.toml"
    write_machine(path, _small())
    old = path.read_bytes()
    real_write = os.write
    calls = []

    def write_half_then_fail(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))  # a short write, as the OS may do
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomicfile.os, "write", write_half_then_fail)
    bigger = Machine(name="mulan", device="mi100", arch="gfx908",
                     peaks=Peaks(values={"hbm_bw": 1.2e12, "l2_bw": 4e12}, details=(), sources=()))
    with pytest.raises(UsageError, match="cannot write machine file .*mulan.toml: No space left on device"):
        write_machine(path, bigger)
    assert len(calls) == 2  # it did fail mid-way, after half the file
    assert path.read_bytes() == old
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("step", ["fsync", "replace"])
def test_failure_before_the_rename_creates_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    def fail(*args: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(atomicfile.os, step, fail)
    path = tmp_path / "new.toml"
    with pytest.raises(UsageError, match="Input/output error"):
        write_machine(path, _small())
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []


def test_bad_values_are_refused_before_any_file_is_touched(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text("old\n")
    for value in (float("nan"), float("inf"), -1.0, 0.0):
        bad = Machine(name="m", device=None, arch=None, peaks=Peaks(values={"hbm_bw": value}, details=(), sources=()))
        with pytest.raises(UsageError, match="finite, positive"):
            write_machine(path, bad)
    assert path.read_text() == "old\n"
    assert _leftovers(tmp_path) == []


# --- malformed files -----------------------------------------------------------------

GOOD = dumps(_small())


def _write(tmp_path: Path, text: str | bytes, name: str = "m.toml") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def test_malformed_toml_names_file_and_line(tmp_path: Path) -> None:
    # line 13 (hbm_bw) loses its value: "hbm_bw =   # B/s", the comment at column 12
    path = _write(tmp_path, GOOD.replace("hbm_bw = 1075460000000.0", "hbm_bw = "))
    assert GOOD.splitlines()[12].startswith("hbm_bw")
    with pytest.raises(InputError) as err:
        read_machine(path)
    assert str(err.value) == (
        f"{path}:13: column 12: not valid TOML: Invalid value; "
        "fix the file or write it again with `perfcheck peaks ... --save`"
    )
    # an unterminated basic string stops at its line; a multi-line one runs to the end
    # of the document, which tomllib reports without a line: the last line is named
    path = _write(tmp_path, GOOD.replace('name = "mulan"', 'name = "mulan'))
    with pytest.raises(InputError, match=rf"^{path}:9: column 14: not valid TOML: Illegal character"):
        read_machine(path)
    path = _write(tmp_path, GOOD.replace('name = "mulan"', 'name = """mulan'))
    with pytest.raises(InputError, match=rf"^{path}:{len(GOOD.splitlines())}: not valid TOML"):
        read_machine(path)


@pytest.mark.parametrize(
    "edit,message",
    [
        (("format_version = 1\n", ""), r"m.toml:1: no format_version"),
        (("format_version = 1", "format_version = 2"), r"m.toml:3: format_version 2 is newer than this perfcheck reads \(1\); upgrade perfcheck"),
        (("format_version = 1", 'format_version = "1"'), r"m.toml:3: format_version must be an integer"),
        (("hbm_bw = 1075460000000.0", "hbm_bandwidth = 1075460000000.0"), r"m.toml:13: column 'hbm_bandwidth': unknown peak 'hbm_bandwidth'"),
        (("hbm_bw = 1075460000000.0", 'hbm_bw = "1075 GB/s"'), r"m.toml:13: column 'hbm_bw': peak hbm_bw must be a number in base units"),
        (("hbm_bw = 1075460000000.0", "hbm_bw = -1.0"), r"m.toml:13: column 'hbm_bw': peak hbm_bw is -1.0"),
        (("hbm_bw = 1075460000000.0", "hbm_bw = 0.0"), r"m.toml:13: column 'hbm_bw': peak hbm_bw is 0.0; a peak must be a finite, positive number"),
        (("hbm_bw = 1075460000000.0", "hbm_bw = inf"), r"m.toml:13: column 'hbm_bw': peak hbm_bw is inf"),
        (('name = "mulan"\n', ""), r"m.toml:5: column 'name': \[machine\] has no name"),
        (("value = 1075460000000.0", 'value = "x"'), r"m.toml:19: column 'value': \[\[details\]\] entry 1 value must be a number"),
        (('unit = "B/s"\n', ""), r"m.toml:15: column 'unit': \[\[details\]\] entry 1: unit must be a string"),
    ],
)
def test_wrong_content_names_the_line(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    assert edit[0] in GOOD
    path = _write(tmp_path, GOOD.replace(edit[0], edit[1], 1))
    with pytest.raises(InputError, match=message):
        read_machine(path)


def test_empty_binary_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="m.toml: file is empty"):
        read_machine(_write(tmp_path, ""))
    with pytest.raises(InputError, match=r"g.toml:2: not UTF-8 text"):
        read_machine(_write(tmp_path, b"format_version = 1\n\xff\xfe\x00garbage", "g.toml"))
    with pytest.raises(InputError, match="nope.toml: no such file"):
        read_machine(tmp_path / "nope.toml")


# --- as a peaks format and through the CLI ---------------------------------------------


def test_sniffed_as_its_own_peaks_format(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD, "anything.txt")  # the name does not matter
    assert detect(path, "peaks").name == "perfcheck-machine"
    assert read_peaks(path).values["hbm_bw"] == 1075.46e9
    # and it claims no benchmark output
    from perfcheck.ingest.formats import Sniff
    from perfcheck.ingest.machinefile import FORMATS

    assert not FORMATS[0].sniff(Sniff(profile(MIXBENCH_MI100)))
    assert not FORMATS[0].sniff(Sniff(_write(tmp_path, "[machine]\nname = 'x'\n", "noversion.toml")))


def test_cli_save_then_use_as_peaks(tmp_path: Path, cli, archdb: types.ModuleType) -> None:  # noqa: ANN001
    if not hasattr(archdb, "describe"):
        pytest.skip("the CLI validates --device with the real arch database")
    target = tmp_path / "machines" / "mulan.toml"
    run = cli("peaks", profile(MIXBENCH_MI100), "--save", target, "--device", "mi100", "--json")
    assert run.code == 0, run.err
    machine = read_machine(target)
    assert (machine.name, machine.device, machine.arch) == ("mulan", "mi100", "gfx908")
    run = cli("peaks", target, "--json")
    assert run.code == 0, run.err
    doc = run.json()
    assert doc["peaks"]["hbm_bw"] == 1075.46e9
    assert doc["sources"][0]["format"] == "perfcheck-machine"
    assert doc["sources"][0]["device"] == "mi100"
    assert [d["name"] for d in doc["details"]][:2] == ["single precision bandwidth", "single precision compute"]


def test_cli_malformed_machine_file_is_one_line(tmp_path: Path, cli) -> None:  # noqa: ANN001
    path = _write(tmp_path, GOOD.replace("[peaks]", "[peaks"))
    run = cli("peaks", path)
    assert run.code == 2
    assert run.err.count("\n") == 1 and "Traceback" not in run.err
    assert run.err.startswith(f"perfcheck: error: {path}:11: column 7: not valid TOML")


@pytest.mark.parametrize("cut", ["hbm_bw = 10754", 'name = "single precision bandwidth"\nsource = "runs/mix', "[[details]]\nname"])
def test_cli_truncated_machine_file_is_refused(tmp_path: Path, cli, cut: str) -> None:  # noqa: ANN001
    text = GOOD[: GOOD.index(cut) + len(cut)]
    path = _write(tmp_path, text)
    run = cli("peaks", path, "--json")
    assert run.code == 2, run.out
    assert run.err.count("\n") == 1 and "Traceback" not in run.err
    assert run.err.startswith(f"perfcheck: error: {path}:{text.count(chr(10)) + 1}: ")
    # "hbm_bw = 10754" is valid TOML: only the missing newline tells it was cut
    if cut == "hbm_bw = 10754":
        assert "may be cut off" in run.err
