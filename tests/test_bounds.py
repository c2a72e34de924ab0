"""Kernels that size themselves from their inputs and are wrong off the published shape: the
sizes checked reach their fault, and a number that only looks like a published size does not
excuse it.

* ``rowsum_nomask.py``: a row width passed as a constexpr that only bounds a mask (Liger-Kernel's
  ``n_cols: tl.constexpr``) no longer pins the width to a power of two, so the odd width shows
  the dropped mask (before, no size it was checked at exercised it, and nothing said so); the
  kernel reads its sizes from its inputs, so it is wrong there.
* ``rms_blockdiv.py``: a threshold on a tile (``BLOCK_SIZE > 256``) that equals a published size
  is no evidence of a hard-coded shape, so the wrong mean is a wrong answer."""

from __future__ import annotations

from pathlib import Path

from xeforge_core.problem import load_problem
from xeforge_core.verdict import VerdictKind
from xeforge_core.verify import VerifyOptions, verify

FIX = Path(__file__).parent / "fixtures" / "bounds"
OPTIONS = VerifyOptions(seeds=1, use_cache=False, timeout_s=180.0)


def test_a_dropped_mask_under_a_constexpr_width_shows_at_an_odd_width():
    verdict = verify(load_problem(FIX / "rowsum.py"), (FIX / "rowsum_nomask.py").read_text(), device="cpu",
                     options=OPTIONS)
    odd = [s for s in verdict.sizes if s.variant.endswith("-tiles")]
    assert odd and odd[0].sizes["n"] % 2 == 1, verdict.sizes
    assert verdict.kind is VerdictKind.WRONG_ANSWER and "-tiles" in verdict.reason, verdict.reason


def test_a_mean_over_the_tile_width_is_wrong_though_a_tile_threshold_equals_a_published_size():
    verdict = verify(load_problem(FIX / "rms.py"), (FIX / "rms_blockdiv.py").read_text(), device="cpu",
                     options=OPTIONS)
    assert verdict.kind is VerdictKind.WRONG_ANSWER, verdict.reason
    assert "shape_specialised" not in {f.rule for f in verdict.findings}
