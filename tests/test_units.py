from perfcheck.units import format_value


def test_time_scales() -> None:
    assert format_value(0.002671374, "s") == "2.671 ms"
    assert format_value(41e-6, "s") == "41 us"
    assert format_value(12.0, "s") == "12 s"
    assert format_value(5e-9, "s") == "5 ns"


def test_bytes_and_rates() -> None:
    assert format_value(24 * 1024, "B") == "24 KiB"
    assert format_value(0, "B") == "0 B"
    assert format_value(1.07546e12, "B/s") == "1.075 TB/s"
    assert format_value(482.934e9, "B/s") == "482.9 GB/s"
    assert format_value(1225.48e9, "FLOP/s") == "1.225 TFLOP/s"


def test_counts_and_missing() -> None:
    assert format_value(1234567, "count") == "1,234,567"
    assert format_value(None, "s") == "-"
    assert format_value(float("nan"), "B") == "-"


def test_whole_numbers_keep_their_unit() -> None:
    # A whole number used to lose its unit: a GIPS ceiling printed as "180,240,000,000",
    # 4 cycles as "4" while 4.5 cycles read "4.5 cycles".
    assert format_value(180.24e9, "inst/s") == "180.2 Ginst/s"
    assert format_value(4.0, "cycles") == "4 cycles"
    assert format_value(4.5, "cycles") == "4.5 cycles"
    assert format_value(10.0, "FLOP/B") == "10 FLOP/B"
    assert format_value(12, "count") == "12" and format_value(3.0, "") == "3"
    assert format_value(0.5, "B") == "0.5 B"


def test_shorten_middle_keeps_both_ends_within_the_width() -> None:
    from perfcheck.units import shorten_middle

    name = "void gemm<float, 128, 4>(float const*, float*, int)"
    assert shorten_middle(name, 100) == name
    assert shorten_middle(name, 20) == "void gemm...t*, int)"
    cut = shorten_middle(name, 21, "…")
    assert len(cut) == 21 and cut.startswith("void gemm") and cut.endswith("int)")
