"""The published shape as the contract: which wrong answers at a size the verifier chose may
come from a kernel written for the published shape (static evidence only; the verifications that
act on it are in test_formats.py)."""

from __future__ import annotations

from pathlib import Path

from xeforge_core.contract import hardcoded_sizes, shape_dependence
from xeforge_core.problem import load_problem
from xeforge_core.verdict import Verdict, VerdictKind

KB = Path(__file__).parent / "fixtures" / "formats" / "kernelbench"


def test_published_sizes_written_as_numbers_are_evidence_tile_sizes_are_not():
    problem = load_problem(KB / "rms_rows.py")
    small = problem.variant("module-small")
    fixed = (KB / "rms_rows_fixed_shape.py").read_text()
    found = hardcoded_sizes(fixed, problem, small)
    assert any(f.startswith("40 (line 25, the published batch_size)") for f in found)
    assert any(f.startswith("8192 (line 25, the published dim)") for f in found)
    generic = ("def launch(x, y, n):\n"
               "    kern[(triton.cdiv(n, 8192),)](x, y, n, BLOCK_SIZE=8192, num_warps=8)\n"
               "CONFIGS = [triton.Config({'BLOCK': 8192}, num_stages=40)]\n")
    assert hardcoded_sizes(generic, problem, small) == []
    # a threshold on a tile chooses a path by the tile, whatever size it equals (Liger-Kernel's
    # `if BLOCK_SIZE > 256 or n_rows < 4096 * 8` beside a published 256)
    assert hardcoded_sizes("def pick(n_rows, BLOCK_SIZE):\n    return BLOCK_SIZE > 8192 or 40 < num_warps\n",
                           problem, small) == []
    # a size named num_<something> is a size, not a launch setting
    assert hardcoded_sizes("def pick(num_cols):\n    return num_cols == 8192\n", problem, small)
    # a size the chosen variant keeps is no evidence: module-small-odd changes only what it changes
    assert hardcoded_sizes(fixed, problem, problem.variant("module")) == []


def test_a_solutions_copy_of_the_problems_input_constants_is_no_evidence():
    """Solutions often repeat the problem's ``batch_size = ...`` and ``get_inputs()`` beside
    their kernels; the verifier makes the inputs with the problem's own functions, so numbers
    only those copies read say nothing of the kernel. The same number where the kernel's code
    reads it is evidence."""
    problem = load_problem(KB / "rms_rows.py")
    small = problem.variant("module-small")
    harness = ("import torch\n"
               "def launch(x, y, n):\n"
               "    kern[(triton.cdiv(n, 1024),)](x, y, n, BLOCK_SIZE=1024)\n"
               "batch_size = 40\ndim = 8192\n"
               "def get_inputs():\n    return [torch.randn(batch_size, dim)]\n"
               "def get_init_inputs():\n    return []\n")
    assert hardcoded_sizes(harness, problem, small) == []
    read = harness + "def rows():\n    return dim\n"
    assert any(f.startswith("8192 (line 5, the published dim)") for f in hardcoded_sizes(read, problem, small))


def test_a_wrong_answer_without_evidence_does_not_depend_on_the_shape():
    wrong = Verdict(kind=VerdictKind.WRONG_ANSWER, reason="wrong answer on variant module-small (seed 0, ...): "
                    "7 output element(s) left unwritten")
    assert shape_dependence(wrong, []) == ""
    assert "published sizes as numbers" in shape_dependence(wrong, ["4096 (line 3, the published dim)"])
    refused = Verdict(kind=VerdictKind.COMPILE_ERROR, reason="arange's range must be a power of 2")
    assert "does not compile there" in shape_dependence(refused, [])


def test_only_the_errors_own_words_count_not_the_code_it_quotes():
    """A compile error that says nothing of the shape stays what it is, even where the line it
    quotes or the traceback above it mentions shapes and sizes."""
    unrelated = Verdict(kind=VerdictKind.COMPILE_ERROR,
                        reason="the Triton kernel does not compile: ValueError: arange's arguments must be of type "
                               "tl.constexpr at candidate.py:34 (`y = x.reshape(x.shape[0], -1)`)",
                        error_text="  File \"candidate.py\", line 40, in forward\n    n = src.numel()  # shape\n"
                                   "ValueError: arange's arguments must be of type tl.constexpr")
    assert shape_dependence(unrelated, []) == ""
    asserted = Verdict(kind=VerdictKind.RUNTIME_ERROR, reason="AssertionError: written for 40 x 8192")
    assert "AssertionError" in shape_dependence(asserted, [])


def test_a_failure_that_names_no_variant_is_placed_after_the_variants_that_passed():
    """A compile error at the third variant leaves passing runs of the first two and names none:
    it failed at the first variant with no passing run, not at the first variant checked (which
    was the published size, so the failure would not have been checked there)."""
    from xeforge_core.contract import failed_variant
    from xeforge_core.verdict import CorrectnessRun

    runs = [CorrectnessRun("module", 0, "module", "reference", True, 0.0, 0.0)]
    compile_error = Verdict(kind=VerdictKind.COMPILE_ERROR, reason="the Triton kernel does not compile", correctness=runs)
    assert failed_variant(compile_error, "module", ["module", "module-tiles", "module-odd"]) == "module-tiles"
    assert failed_variant(compile_error, "module") == "module"  # the order unknown: the first call's
    assert failed_variant(Verdict(kind=VerdictKind.COMPILE_ERROR, reason="x"), "module", ["module", "module-odd"]) == "module"


def test_a_kernel_right_only_at_the_published_size_is_wrong_and_says_it_matches_there():
    """A row sum looping over ``n // BLOCK`` unmasked tiles reads its size from its input, so the
    sizes it fails at (the tile-derived one, no multiple of its tile) are sizes it accepts: wrong.
    Checked at the published size too (asked for here; on a GPU always), the verdict says it
    matches there, which is why an evaluation at that size alone passes it."""
    from pathlib import Path

    from xeforge_core.problem import load_problem
    from xeforge_core.verify import VerifyOptions, verify

    fixtures = Path(__file__).parent / "fixtures" / "published"
    verdict = verify(load_problem(fixtures / "row_sum_problem.py"), (fixtures / "row_sum_no_tail.py").read_text(),
                     device="cpu", options=VerifyOptions(seeds=1, measure_performance=False, use_cache=False,
                                                         variants=["module"]))
    assert verdict.kind.value == "wrong_answer" and "module-tiles" in verdict.reason, verdict.reason
    assert any("at the published size (module) it matches the reference" in w for w in verdict.warnings), \
        verdict.warnings


def test_tiles_are_told_by_use_whatever_their_names():
    """``BM``/``R`` name no tile, but one multiplies a program id and the other is the number
    the launch grid divides a size by: literals bound to them are tiles, not published sizes.
    A constexpr that only spans ``tl.arange`` is still read as a size written as a number."""
    problem = load_problem(KB / "rms_rows.py")
    small = problem.variant("module-small")
    general = ("@triton.jit\n"
               "def k(x, y, n, R: tl.constexpr, BM: tl.constexpr):\n"
               "    pid = tl.program_id(0)\n"
               "    offs = pid * R + tl.arange(0, BM)\n"
               "def launch(x, y, n):\n"
               "    k[(triton.cdiv(n, 40),)](x, y, n, R=8192, BM=40)\n")
    assert hardcoded_sizes(general, problem, small) == []
    fixed = ("@triton.jit\n"
             "def k(x, y, n, COLS: tl.constexpr):\n"
             "    offs = tl.program_id(0) * 16 + tl.arange(0, COLS)\n"
             "def launch(x, y, n):\n"
             "    k[(n,)](x, y, n, COLS=8192)\n")
    assert any(f.startswith("8192 (line 5") for f in hardcoded_sizes(fixed, problem, small))


def test_a_memory_fault_alone_is_no_refusal_of_the_shape():
    """A kernel that reads its sizes from its inputs and faults at a size the verifier chose has
    a bug; only beside published sizes written as numbers is the fault the shape's."""
    fault = Verdict(kind=VerdictKind.RUNTIME_ERROR, reason="out of bounds access at candidate.py:12")
    assert shape_dependence(fault, []) == ""
    assert "out of bounds" in shape_dependence(fault, ["4096 (line 3, the published dim)"])


def test_a_finding_quotes_a_failure_as_a_sentence():
    """The shape_specialised finding read "..., it wrong answer: wrong answer on variant ..." and
    cut its quote inside "(first at [0, ": the kind becomes a verb, its words are not repeated,
    and a long quote ends at a clause outside brackets."""
    from xeforge_core.contract import clipped, shape_specialised_finding

    reason = ("wrong answer on variant module-odd (seed 0, get_inputs() inputs) vs reference: output 0: 48 of 800 "
              "element(s) outside the float64-calibrated bound (error up to 6.4e+07x the reference's own error "
              "scale, 512x allowed; relative error 3.4e-07 vs the float64 truth) (first at [0, 17]: got -0.79, "
              "expected -2.2), max abs error 1.85, and so on and on for a long while past three hundred characters")
    failed = Verdict(kind=VerdictKind.WRONG_ANSWER, reason=reason)
    text = shape_specialised_finding("module-odd", failed, "its loop bound is the published size").message
    assert "it gives a wrong answer on variant module-odd (seed 0" in text and "it wrong answer" not in text
    quote = clipped(reason[len("wrong answer "):])
    assert quote.endswith(" ...") and quote.count("(") == quote.count(")") and quote.count("[") == quote.count("]")
    assert clipped("short") == "short"
