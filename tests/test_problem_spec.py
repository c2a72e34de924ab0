"""The Xe-Forge YAML spec parser: format, quirks and errors that name file, line and field."""

from __future__ import annotations

import textwrap

import pytest

from xeforge_core.problem import ProblemError, Spec, odd_size_variant, parse_spec

BASE = """\
inputs:
  X:
    shape: [BATCH, IN_FEAT]
    dtype: fp16
  Y:
    shape: [BATCH, NH, N]
inits:
  - dim: IN_FEAT
  - ALPHA: 0.5
  - NAME: relu
  - EPS: EPS
default_variant: small
# notes live in comments: a scalar top-level key is refused (test_unknown_keys_...)
ci:
  - params: [X, Y]
    dims: {BATCH: 4, IN_FEAT: 64, N: 8, NH: 2, EPS: 1e-5}
    flop: "2*BATCH*IN_FEAT + N*NH"
    rtol: 1e-3
    atol: "0.01"
small:
  - params: [Y, X]
    dtype: bfloat16
    dims: {BATCH: 2, IN_FEAT: 16, N: 3, NH: 1, EPS: 0.001}
    flop: 100
  - params: [X]
    dims: {BATCH: 1, IN_FEAT: 1}
"""


def spec(text: str = BASE) -> Spec:
    return parse_spec(text, "prob.yaml")


def test_inputs_inits_and_variants():
    s = spec()
    assert list(s.inputs) == ["X", "Y"]
    assert s.inputs["X"].dtype == "float16"  # fp16 normalised to the torch name
    assert s.inputs["Y"].dtype == "float32"  # default
    assert s.inputs["Y"].shape == ("BATCH", "NH", "N")
    assert [(i.key, i.value) for i in s.inits] == [("dim", "IN_FEAT"), ("ALPHA", 0.5), ("NAME", "relu"),
                                                   ("EPS", "EPS")]
    assert list(s.variants) == ["ci", "small", "small[1]"]  # file order
    assert s.default_variant == "small"


def test_variant_resolution():
    ci = spec().variants["ci"]
    assert ci.params == ["X", "Y"]
    assert ci.dims["EPS"] == "1e-5"  # YAML 1.1 keeps it a string, as given
    assert ci.init_values == [64, 0.5, "relu", "1e-5"]  # positional, per variant
    assert ci.flop == 2 * 4 * 64 + 8 * 2
    assert ci.rtol == pytest.approx(1e-3) and ci.atol == pytest.approx(0.01)
    assert ci.shapes == {"X": (4, 64), "Y": (4, 2, 8)}
    assert ci.input_dtypes == {"X": "float16", "Y": "float32"}
    assert ci.bytes == 4 * 64 * 2 + 4 * 2 * 8 * 4  # inputs only
    small = spec().variants["small"]
    assert small.params == ["Y", "X"]  # forward() order kept
    assert small.dtype == "bfloat16" and small.input_dtypes == {"Y": "bfloat16", "X": "bfloat16"}
    assert small.init_values == [16, 0.5, "relu", 0.001]
    assert small.flop == 100.0
    data = small.to_data()
    assert data["init_values"] == [16, 0.5, "relu", 0.001] and data["shapes"]["Y"] == [2, 1, 3]


def test_every_entry_of_a_variant_list_is_a_variant():
    s = spec()
    assert s.variants["small"].dims["BATCH"] == 2
    second = s.variants["small[1]"]
    assert second.params == ["X"] and second.dims == {"BATCH": 1, "IN_FEAT": 1}
    assert list(s.variants) == ["ci", "small", "small[1]"]
    assert not any("entries" in w for w in s.warnings)


def test_every_ci_entry_is_a_correctness_variant():
    from xeforge_core.problem.model import ModuleFile, Problem

    text = BASE.replace("small:", "ci_more:\n  - params: [X]\n    dims: {BATCH: 1, IN_FEAT: 1}\nsmall:").replace(
        "ci:\n  - params: [X, Y]", "ci:\n  - params: [X, Y]\n    dims: {BATCH: 4, IN_FEAT: 64, N: 8, NH: 2, EPS: 1e-5}\n"
        "  - params: [X, Y]", 1)
    s = parse_spec(text, "prob.yaml")
    problem = Problem(name="p", kernel=ModuleFile(source="x = 1"), spec=s)
    assert [v.name for v in problem.correctness_variants()] == ["ci", "ci[1]"]


def test_a_bad_later_entry_names_its_index():
    with pytest.raises(ProblemError) as err:
        parse_spec(BASE.replace("    dims: {BATCH: 1, IN_FEAT: 1}", "    dims: {BATCH: 1, IN_FEAT: 1}\n  - 7"),
                   "prob.yaml")
    assert "small[2]" in str(err.value)


def test_list_dim_spliced_into_shape_and_passed_to_inits():
    s = parse_spec(textwrap.dedent("""\
        inputs:
          S: {shape: [SCALE_SHAPE], dtype: float32}
        inits:
          - dim: SCALE_SHAPE
        ci:
          - params: [S]
            dims: {SCALE_SHAPE: [4, 8]}
        """))
    assert s.variants["ci"].shapes["S"] == (4, 8)
    assert s.variants["ci"].init_values == [[4, 8]]


def _err(text: str) -> ProblemError:
    with pytest.raises(ProblemError) as err:
        parse_spec(text, "bad.yaml")
    return err.value


def test_unknown_dim_symbol_in_shape():
    e = _err(BASE.replace("shape: [BATCH, NH, N]", "shape: [BATCH, NH, HEADS]"))
    assert "HEADS" in e.message and "variant ci" in e.message
    assert e.file == "bad.yaml" and e.line == 6 and e.field == "inputs.Y.shape[2]"


def test_unknown_init_dim():
    e = _err(BASE.replace("- dim: IN_FEAT", "- dim: IN_FEATURES"))
    assert e.field == "inits[0]" and e.line == 8 and "IN_FEATURES" in e.message


def test_bad_dtype_in_input_and_variant():
    e = _err(BASE.replace("dtype: fp16", "dtype: float17"))
    assert e.field == "inputs.X.dtype" and e.line == 4 and "float17" in e.message
    e = _err(BASE.replace("dtype: bfloat16", "dtype: floot"))
    assert e.field == "small[0].dtype" and e.line == 22


def test_variant_naming_unknown_input():
    e = _err(BASE.replace("params: [X, Y]", "params: [X, Z]"))
    assert e.field == "ci[0].params[1]" and e.line == 15
    assert "'Z'" in e.message and "X, Y" in e.message


def test_non_arithmetic_flop_names_field():
    e = _err(BASE.replace('flop: "2*BATCH*IN_FEAT + N*NH"', "flop: \"__import__('os').getcwd()\""))
    assert e.field == "ci[0].flop" and e.line == 17 and "__import__" in e.message


def test_yaml_syntax_error_has_line():
    e = _err("inputs:\n  X: {shape: [A, dtype: float32}\n")
    assert e.line is not None and "YAML syntax error" in e.message


def test_bad_inits_and_tolerances_and_dims():
    assert _err(BASE.replace("- ALPHA: 0.5", "- 0.5")).field == "inits[1]"
    assert _err(BASE.replace("rtol: 1e-3", "rtol: tight")).field == "ci[0].rtol"
    assert _err(BASE.replace("rtol: 1e-3", "rtol: -1")).field == "ci[0].rtol"
    # a dim value that is not a size is named where it was written, not at the shape that uses it
    bad = _err(BASE.replace("BATCH: 4,", "BATCH: 4.5,"))
    assert bad.field == "ci[0].dims.BATCH" and bad.line == 16 and "4.5" in bad.message
    assert _err(BASE.replace("BATCH: 4,", "BATCH: yes,")).field == "ci[0].dims.BATCH"


def test_empty_and_non_map_and_huge_and_binary():
    assert "empty" in _err("   \n").message
    assert "must be a YAML map" in _err("- a\n- b\n").message
    assert "limit" in _err("x: " + "a" * 1_000_001).message
    with pytest.raises(ProblemError, match="not valid UTF-8"):
        parse_spec(b"inputs:\n  X: \xff\n", "bin.yaml")


def test_warnings_for_ignored_things():
    s = parse_spec(BASE + "large: []\nci:\n  - params: [X]\n    dims: {BATCH: 1, IN_FEAT: 1}\n", "w.yaml")
    text = "\n".join(s.warnings)
    assert "'large' is an empty list" in text
    assert "key given more than once" in text


# -- unknown keys: refused at their own line with the nearest valid key -----------------------

GEMM = """\
inputs:
  X:
    shape: [M, K]
    dtype: float16
inits:
  - dim: K
  - dim: N
ci:
  - params: [X]
    dtype: float16
    dims:
      M: 40
      K: 72
      N: 48
    flop: "2*M*N*K"
bench-gpu:
  - params: [X]
    dims: {M: 4096, K: 4096, N: 4096}
    flop: "2*M*N*K"
"""


@pytest.mark.parametrize("typo, fixed, line, field", [
    ("bench_gpu:", "bench-gpu", 16, "bench_gpu"),        # would become a family of its own
    ("Bench-GPU:", "bench-gpu", 16, "Bench-GPU"),
    ("bench-gup:", "bench-gpu", 16, "bench-gup"),
    ("CI:", "ci", 8, "CI"),
])
def test_a_misspelt_variant_family_is_refused(typo: str, fixed: str, line: int, field: str) -> None:
    text = GEMM.replace("bench-gpu:", typo) if fixed == "bench-gpu" else GEMM.replace("ci:", typo)
    e = _err(text)
    assert (e.line, e.field) == (line, field)
    assert f"did you mean {fixed!r}" in e.message and str(e).startswith(f"bad.yaml:{line} [{field}]")


def test_a_misspelt_key_of_an_input_or_a_variant_is_refused_at_its_line() -> None:
    e = _err(GEMM.replace("    dtype: float16\ninits", "    dtpye: float16\ninits"))
    assert (e.line, e.field) == (4, "inputs.X.dtpye") and "did you mean 'dtype'" in e.message
    # dimz: reported where it is written (line 11), not at the input whose shape uses a dim
    e = _err(GEMM.replace("    dims:\n      M: 40", "    dimz:\n      M: 40"))
    assert (e.line, e.field) == (11, "ci[0].dimz") and "did you mean 'dims'" in e.message
    e = _err(GEMM.replace('    flop: "2*M*N*K"\nbench', '    flops: "2*M*N*K"\nbench'))
    assert (e.line, e.field) == (15, "ci[0].flops") and "did you mean 'flop'" in e.message
    e = _err(GEMM.replace("    shape: [M, K]", "    shapes: [M, K]"))
    assert (e.line, e.field) == (3, "inputs.X.shapes") and "did you mean 'shape'" in e.message


def test_a_top_level_scalar_or_map_is_refused() -> None:
    e = _err(GEMM + "default_varient: bench-gpu\n")
    assert (e.line, e.field) == (20, "default_varient") and "did you mean 'default_variant'" in e.message
    e = _err(GEMM + "owner: someone\n")
    assert e.line == 20 and "unknown top-level key 'owner'" in e.message and "comments" in e.message
    e = _err(GEMM + "bench-xpu:\n  params: [X]\n")
    assert e.line == 20 and "'bench-xpu' must be a list" in e.message and "got a map" in e.message
    e = _err(GEMM + "input:\n  - params: [X]\n")
    assert e.line == 20 and "did you mean 'inputs'" in e.message


def test_families_of_ones_own_and_later_format_keys_still_load() -> None:
    s = spec(GEMM + "bench-gpu-old:\n  - params: [X]\n    dims: {M: 8, K: 8, N: 8}\n"
                    "bench-gpu-3:\n  - params: [X]\n    dims: {M: 8, K: 8, N: 8}\n"
                    "large:\n  - params: [X]\n    dims: {M: 8, K: 8, N: 8}\n    mem_bytes: 100\n")
    assert list(s.variants) == ["ci", "bench-gpu", "bench-gpu-old", "bench-gpu-3", "large"]
    assert any("mem_bytes of variant large is not read" in w for w in s.warnings)
    s = spec(GEMM.replace("    dtype: float16\ninits", "    dtype: float16\n    range: [0, 4]\ninits"))
    assert any("range of input X is not read" in w for w in s.warnings)


def test_every_real_spec_still_loads() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    paths = sorted((root / "sample_kernels").rglob("*.yaml")) + sorted((root / "benchmarks").rglob("*.yaml"))
    cases = root.parent / "shared" / "cases" / "xeforge"  # real kernels written elsewhere, where present
    paths += sorted(cases.glob("*.yaml")) if cases.is_dir() else []
    paths = [p for p in paths if p.name != "manifest.yaml"]  # the demo's trajectory list, not a spec
    assert len(paths) >= 15
    for path in paths:
        assert parse_spec(path.read_text(), path).variants, path


def test_default_variant_unknown_is_a_warning():
    s = parse_spec(BASE.replace("default_variant: small", "default_variant: huge"))
    assert any("default_variant 'huge'" in w for w in s.warnings)


def test_odd_size_variant_moves_only_input_only_dims():
    s = spec()
    odd = odd_size_variant(s, "ci")
    assert odd is not None and odd.name == "ci-odd"
    # IN_FEAT is an init (weights depend on it): unchanged. BATCH 4->3, N 8->7, NH 2->3.
    assert odd.dims == {"BATCH": 3, "IN_FEAT": 64, "N": 7, "NH": 3, "EPS": "1e-5"}
    assert odd.shapes == {"X": (3, 64), "Y": (3, 3, 7)}
    assert odd.init_values == s.variants["ci"].init_values
    assert odd.flop == 2 * 3 * 64 + 7 * 3
    assert s.variants["ci"].dims["BATCH"] == 4  # original untouched


def test_odd_size_variant_none_when_nothing_to_move():
    s = parse_spec(textwrap.dedent("""\
        inputs:
          X: {shape: [B, H], dtype: float32}
        inits:
          - dim: H
        ci:
          - params: [X]
            dims: {B: 7, H: 64}
        """))
    assert odd_size_variant(s, s.variants["ci"]) is None  # B already odd, H is an init


def test_variant_dtype_overrides_only_floating_point_inputs():
    s = parse_spec(textwrap.dedent("""\
        inputs:
          X: {shape: [N], dtype: float32}
          IDX: {shape: [N], dtype: int64}
        ci:
          - params: [X, IDX]
            dtype: float16
            dims: {N: 10}
        """))
    v = s.variants["ci"]
    assert v.input_dtypes == {"X": "float16", "IDX": "int64"}
    assert v.bytes == 10 * 2 + 10 * 8


def test_allow_lists_the_precision_downgrades_the_problem_accepts():
    text = "inputs:\n  X: {shape: [N]}\nallow: [fp16-accumulation, tf32]\nci:\n  - params: [X]\n    dims: {N: 4}\n"
    s = parse_spec(text, "prob.yaml")
    assert s.allow == ("tf32", "fp16-accumulation") and list(s.variants) == ["ci"]  # not a variant family
    assert parse_spec(text.replace("[fp16-accumulation, tf32]", "tf32"), "prob.yaml").allow == ("tf32",)
    with pytest.raises(ProblemError) as exc:
        parse_spec(text.replace("[fp16-accumulation, tf32]", "[tf32,\n  fp16-acumulation]"), "prob.yaml")
    assert (exc.value.line, exc.value.field) == (4, "allow[1]")
    assert "did you mean 'fp16-accumulation'" in str(exc.value) and "prob.yaml" in str(exc.value)
    with pytest.raises(ProblemError, match="allow must be a list"):
        parse_spec(text.replace("[fp16-accumulation, tf32]", "{tf32: yes}"), "prob.yaml")


def test_a_zero_dim_is_refused_as_a_size_that_checks_nothing():
    e = _err(BASE.replace("dims: {BATCH: 4, IN_FEAT: 64", "dims: {BATCH: 0, IN_FEAT: 64"))
    assert "BATCH" in e.message and "no element compares nothing" in e.message and "variant ci" in e.message


def test_a_shape_dim_misspelt_against_every_variant_is_reported_at_the_shape():
    """``shape: [TOKENS, HIDDN]`` where every variant defines ``HIDDEN``: the one shape is the typo,
    not the variants (each would need the same typo), so it is said at the shape's line."""
    text = BASE.replace("shape: [BATCH, IN_FEAT]", "shape: [BATCH, IN_FEET]")
    e = _err(text)
    assert e.line == 3 and e.field == "inputs.X.shape[1]" and e.message.endswith("did you mean 'IN_FEAT'?"), e


def test_a_spec_with_no_variant_and_a_mistyped_dim_in_a_flop_formula_are_refused_with_the_fix(tmp_path):
    """A spec that defines no variant at all is refused where it is read (nothing could be
    checked or timed), and a dim misspelt inside a flop formula is named with the nearest dim."""
    inputs = "inputs:\n  x: {shape: [N], dtype: float32}\n"
    with pytest.raises(ProblemError, match="defines no variants.*add a `ci` list"):
        parse_spec(inputs, path="k.yaml")
    with pytest.raises(ProblemError, match="'HIDDN'.*did you mean 'HIDDEN'"):
        parse_spec(inputs + "ci:\n  - params: [x]\n    dims: {N: 8, HIDDEN: 4}\n    flop: N * HIDDN\n",
                   path="k.yaml")
