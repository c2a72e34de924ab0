"""One formatting module for numbers with units (xeforge_core.units): the values the issue
listed as raw are written with units, singular and plural are right, and nothing prints None."""

from __future__ import annotations

from xeforge_core import units


def test_the_raw_numbers_of_the_issue_get_units() -> None:
    assert units.flop(137438953472) == "137.4 GFLOP"
    assert units.size(33554432) == "32.0 MiB"
    assert units.size(18874368) == "18.0 MiB"
    assert units.size_exact(579_000) == "565.4 KiB (579,000 bytes)"
    assert units.number(None, missing="dtype default") == "dtype default"


def test_rates_times_and_ratios() -> None:
    assert units.tflops(451.83) == "451.8 TFLOP/s" and units.tflops(0.16) == "0.16 TFLOP/s"
    assert units.tflops(0.0042) == "4.2 GFLOP/s"
    assert units.bandwidth(221.4) == "221 GB/s" and units.bandwidth(4800) == "4.80 TB/s"
    assert units.duration_us(304.2) == "304.2 µs" and units.duration_us(1982.6) == "1.98 ms"
    assert units.duration_us(2.5e6) == "2.50 s" and units.duration_us(0.85) == "0.85 µs"
    assert units.speedup(6.521) == "6.52x" and units.percent(0.462) == "46%"
    assert units.intensity(682.7) == "683 FLOP/byte" and units.seconds(1089.2) == "18 min 9 s"
    assert units.duration_us(float("nan")) == units.MISSING and units.flop(None) == "—"


def test_singular_and_plural() -> None:
    assert units.plural(1, "issue") == "1 issue" and units.plural(2, "version") == "2 versions"
    assert units.plural(0, "candidate") == "0 candidates" and units.plural(3, "match") == "3 matches"
    assert units.plural(2, "entry") == "2 entries" and units.plural(1, "byte") == "1 byte"
    assert units.plural(1024, "byte") == "1,024 bytes"
