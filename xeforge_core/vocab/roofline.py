"""The roofline: what a device can attain at an arithmetic intensity (Williams, Waterman and
Patterson, "Roofline: an insightful visual performance model", CACM 52(4), 2009).

Units: peak in TFLOP/s (10^12 FLOP/s), bandwidth in GB/s (10^9 bytes/s), intensity in FLOP per
byte. One small module with no dependencies, so the worker's timing, the prompts' problem
context, the knowledge base's profiles and the charts compute it the same way.
"""

from __future__ import annotations


def ridge_point(peak_tflops: float | None, bandwidth_gbps: float | None) -> float | None:
    """The intensity (FLOP/byte) where the roofline turns from memory-bound to compute-bound:
    peak FLOP/s over bandwidth bytes/s. ``None`` without both numbers."""
    if not peak_tflops or not bandwidth_gbps:
        return None
    return peak_tflops * 1e12 / (bandwidth_gbps * 1e9)


def memory_roof_tflops(intensity: float, bandwidth_gbps: float) -> float:
    """TFLOP/s the memory bandwidth allows at ``intensity``: FLOP/byte x GB/s = GFLOP/s, / 1e3."""
    return intensity * bandwidth_gbps / 1e3


def attainable_tflops(intensity: float | None, peak_tflops: float | None,
                      bandwidth_gbps: float | None) -> float | None:
    """The roofline at ``intensity``: the lower of the peak and the memory roof, of those known;
    ``None`` when neither is."""
    roofs = []
    if peak_tflops:
        roofs.append(float(peak_tflops))
    if bandwidth_gbps and intensity:
        roofs.append(memory_roof_tflops(intensity, float(bandwidth_gbps)))
    return min(roofs) if roofs else None


def bound(intensity: float | None, ridge: float | None) -> str:
    """``compute`` at or right of the ridge point, ``memory`` left of it, ``unknown`` without
    both numbers."""
    if intensity is None or not ridge:
        return "unknown"
    return "compute" if intensity >= ridge else "memory"
