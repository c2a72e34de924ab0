"""Numbers as a kernel engineer reads them: one formatting module for the UI, the CLI and the
reports, so that the same quantity is written the same way everywhere.

* work: ``flop(137438953472)`` -> ``"137.4 GFLOP"`` (decimal prefixes, as TFLOP/s are);
* sizes: ``size(33554432)`` -> ``"32.0 MiB"`` (binary prefixes for memory: KiB, MiB, GiB);
* rates: ``bandwidth(221.4)`` -> ``"221 GB/s"`` (decimal, as vendors quote bandwidth),
  ``tflops(451.8)`` -> ``"451.8 TFLOP/s"``;
* times: ``duration_us(304.2)`` -> ``"304.2 µs"``, switching to ms and s for long ones;
* ratios: ``speedup(6.52)`` -> ``"6.52x"``, ``percent(0.46)`` -> ``"46%"``;
* counts: ``plural(1, "issue")`` -> ``"1 issue"``, ``plural(2, "version")`` -> ``"2 versions"``.

Every function returns ``missing`` (default ``"—"``) for ``None`` (and NaN), so a value that was
not measured never prints as ``None`` or ``nan``. Only the standard library is used: the worker
may import this module too.

Sources: SI prefixes (BIPM, The International System of Units, 9th ed., 2019) for flop, bytes
per second and seconds; IEC 80000-13 binary prefixes (KiB = 1024 bytes) for memory sizes.
"""

from __future__ import annotations

import math

MISSING = "—"

_DECIMAL = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_BINARY = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))

#: Irregular plurals of the words the product counts.
_IRREGULAR = {"child": "children", "index": "indices", "matrix": "matrices", "this": "these",
              "is": "are", "was": "were", "has": "have"}


def _absent(value: float | int | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _digits(value: float, sig: int = 4) -> str:
    """``value`` with at most ``sig`` significant digits and no trailing zeros after the point
    beyond one decimal (``137.4``, ``32.0``, ``1.25``)."""
    if value == 0:
        return "0"
    mag = math.floor(math.log10(abs(value)))
    decimals = max(0, sig - 1 - mag)
    text = f"{value:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0")
        if text.endswith("."):
            text += "0"
    return text


def flop(value: float | int | None, *, missing: str = MISSING) -> str:
    """Floating-point operations with a decimal prefix: ``137438953472`` -> ``"137.4 GFLOP"``,
    ``512`` -> ``"512 FLOP"``."""
    if _absent(value):
        return missing
    v = float(value)  # type: ignore[arg-type]
    for scale, prefix in _DECIMAL:
        if abs(v) >= scale:
            return f"{_digits(v / scale)} {prefix}FLOP"
    return f"{_digits(v)} FLOP"


def size(value: float | int | None, *, missing: str = MISSING) -> str:
    """A memory size in bytes with a binary prefix: ``33554432`` -> ``"32.0 MiB"``,
    ``18874368`` -> ``"18.0 MiB"``, ``600`` -> ``"600 bytes"``, ``1`` -> ``"1 byte"``."""
    if _absent(value):
        return missing
    v = float(value)  # type: ignore[arg-type]
    for scale, unit in _BINARY:
        if abs(v) >= scale:
            return f"{v / scale:.1f} {unit}"
    n = int(v)
    return plural(n, "byte")


def size_exact(value: int | None, *, missing: str = MISSING) -> str:
    """A size with its exact byte count for limits and refusals: ``592896`` ->
    ``"579.0 KiB (592,896 bytes)"``."""
    if _absent(value):
        return missing
    n = int(value)  # type: ignore[arg-type]
    if n < 1024:
        return plural(n, "byte")
    return f"{size(n)} ({n:,} bytes)"


def bandwidth(gbps: float | None, *, missing: str = MISSING) -> str:
    """A bandwidth given in GB/s (10^9 bytes per second): ``221.4`` -> ``"221 GB/s"``,
    ``4800`` -> ``"4.80 TB/s"``, ``0.52`` -> ``"0.52 GB/s"``."""
    if _absent(gbps):
        return missing
    v = float(gbps)  # type: ignore[arg-type]
    if abs(v) >= 1000:
        return f"{v / 1000:.2f} TB/s"
    if abs(v) >= 100:
        return f"{v:.0f} GB/s"
    if abs(v) >= 10:
        return f"{v:.1f} GB/s"
    return f"{v:.2f} GB/s"


def tflops(value: float | None, *, missing: str = MISSING) -> str:
    """A rate given in TFLOP/s: ``451.83`` -> ``"451.8 TFLOP/s"``, ``0.16`` -> ``"0.16 TFLOP/s"``,
    ``0.0042`` -> ``"4.2 GFLOP/s"``."""
    if _absent(value):
        return missing
    v = float(value)  # type: ignore[arg-type]
    if v != 0 and abs(v) < 0.01:
        return f"{_digits(v * 1000, 3)} GFLOP/s"
    if abs(v) >= 100:
        return f"{v:.1f} TFLOP/s"
    return f"{_digits(v, 3)} TFLOP/s"


def duration_us(value: float | None, *, missing: str = MISSING) -> str:
    """A time given in microseconds: ``304.2`` -> ``"304.2 µs"``, ``1982.6`` -> ``"1.98 ms"``,
    ``36700`` -> ``"36.7 ms"``, ``2.5e6`` -> ``"2.50 s"``, ``0.85`` -> ``"0.85 µs"``."""
    if _absent(value):
        return missing
    v = float(value)  # type: ignore[arg-type]
    if abs(v) >= 1e6:
        return f"{v / 1e6:.2f} s"
    if abs(v) >= 1e3:
        ms = v / 1e3
        return f"{ms:.2f} ms" if abs(ms) < 10 else f"{ms:.1f} ms"
    if abs(v) >= 10:
        return f"{v:.1f} µs"
    return f"{v:.2f} µs"


def seconds(value: float | None, *, missing: str = MISSING) -> str:
    """A wall-clock time in seconds: ``0.42`` -> ``"0.42 s"``, ``7.14`` -> ``"7.1 s"``,
    ``1089.2`` -> ``"18 min 9 s"``."""
    if _absent(value):
        return missing
    v = float(value)  # type: ignore[arg-type]
    if v >= 120:
        minutes, rest = divmod(int(round(v)), 60)
        return f"{minutes} min {rest} s"
    return f"{v:.2f} s" if v < 1 else f"{v:.1f} s"


def speedup(value: float | None, *, missing: str = MISSING) -> str:
    """A ratio of times (baseline over candidate): ``6.521`` -> ``"6.52x"``."""
    if _absent(value):
        return missing
    return f"{float(value):.2f}x"  # type: ignore[arg-type]


def percent(fraction: float | None, *, missing: str = MISSING, decimals: int = 0) -> str:
    """A fraction as a percentage: ``0.462`` -> ``"46%"``, with ``decimals=1`` -> ``"46.2%"``."""
    if _absent(fraction):
        return missing
    return f"{float(fraction) * 100:.{decimals}f}%"  # type: ignore[arg-type]


def intensity(flop_per_byte: float | None, *, missing: str = MISSING) -> str:
    """Arithmetic intensity: ``682.7`` -> ``"683 FLOP/byte"``, ``0.083`` -> ``"0.083 FLOP/byte"``."""
    if _absent(flop_per_byte):
        return missing
    v = float(flop_per_byte)  # type: ignore[arg-type]
    return f"{v:.0f} FLOP/byte" if abs(v) >= 100 else f"{_digits(v, 2 if abs(v) >= 1 else 2)} FLOP/byte"


def number(value: float | int | None, *, missing: str = MISSING) -> str:
    """A plain value such as a tolerance: ``0.01`` -> ``"0.01"``, ``1e-05`` -> ``"1e-05"``,
    ``4096`` -> ``"4,096"``."""
    if _absent(value):
        return missing
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return f"{int(value):,}"
    v = float(value)  # type: ignore[arg-type]
    return f"{v:.3g}"


def plural_word(n: int, word: str, plural_form: str | None = None) -> str:
    """``word`` in the number that ``n`` asks for (English: singular only for exactly 1)."""
    if n == 1:
        return word
    if plural_form:
        return plural_form
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if word.endswith(("s", "x", "sh", "ch")):
        return word + "es"
    if word.endswith("y") and len(word) > 1 and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def plural(n: int, word: str, plural_form: str | None = None) -> str:
    """``"1 issue"``, ``"2 issues"``, ``"0 versions"``, ``"3 iterations"``, ``"1,024 bytes"``."""
    return f"{n:,} {plural_word(n, word, plural_form)}"
