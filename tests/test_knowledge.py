"""The knowledge base validates against its schema, and broken data is reported by file and field."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from xeforge_core.knowledge import (
    CODEMODS,
    GRF_MODE_VALUES,
    KNOWLEDGE_ROOT,
    STAGE_IDS,
    KnowledgeError,
    installed_triton_pointer_api,
    load_knowledge,
    version_matches,
)

REQUIRED_RULES = {
    "pow2_num_warps", "pow2_tile_sizes", "grf_mode_values", "autotune_keys_no_defaults", "swizzle_1d_grid",
    "boundary_check_indices", "block_io_for_dot_operands", "block_ptr_removed", "int64_offsets_for_large_strides",
    "dot_fp32_accumulate_low_precision_operands", "no_float64", "no_weight_repack_in_forward",
    "hardcoded_device_strings", "device_specific_sync", "fuse_when_intermediate_disappears",
    "persistent_only_large_grids", "subgroup_size_sweep", "exp2_math",
}


@pytest.fixture
def kb_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "knowledge"
    shutil.copytree(KNOWLEDGE_ROOT, dst)
    return dst


def test_knowledge_base_loads_and_is_complete():
    kb = load_knowledge()
    assert {"arc_b580", "arc_pro_b70", "max_1550", "iris_xe", "nvidia_h200"} <= set(kb.profiles)
    assert set(kb.rules) >= REQUIRED_RULES
    assert {s.target for s in kb.search_spaces.values()} == {"xpu", "cuda"}
    for r in kb.rules.values():
        assert r.stage in STAGE_IDS and r.sources and r.why.strip()
        before, after = r.example_code()
        assert before.strip() and after.strip() and before != after
        assert r.codemod is None or r.codemod in CODEMODS
    assert {r.codemod for r in kb.rules.values() if r.codemod} == set(CODEMODS)
    assert load_knowledge() is kb  # cached


def test_profiles_have_sourced_numbers_and_device_matching():
    kb = load_knowledge()
    for p in kb.profiles.values():
        for name in ("compute_units", "subgroup_sizes", "slm_bytes_per_workgroup", "l2_bytes",
                     "max_warps_per_workgroup", "memory_bandwidth_gbps"):
            assert getattr(p, name).source, f"{p.id}.{name} has no source"
        assert all(f.source for f in p.peak_tflops.values())
    assert kb.profile_for_device("Intel(R) Arc(TM) B580 Graphics").id == "arc_b580"
    assert kb.profile_for_device("Intel(R) Arc(TM) Pro B70 Graphics").id == "arc_pro_b70"
    assert kb.profile_for_device("Intel(R) Data Center GPU Max 1550").id == "max_1550"
    assert kb.profile_for_device("Intel(R) Iris(R) Xe Graphics").id == "iris_xe"
    assert kb.profile_for_device("NVIDIA H200").id == "nvidia_h200"
    assert kb.profile_for_device("NVIDIA GeForce RTX 4090") is None
    assert kb.profile_for_device("") is None
    h200 = kb.profiles["nvidia_h200"]
    assert h200.compute_units.value == 132 and h200.l2_bytes.value == 60 * 1024 * 1024  # FACTS.md
    # ridge point = peak / bandwidth: 989.5e12 / 4800e9
    assert h200.ridge_point("float16") == pytest.approx(989.5e12 / 4800e9)
    assert h200.peak("torch.bfloat16") == 989.5
    assert h200.peak("int4") == h200.peak("fp32")  # unknown dtypes fall back to fp32


def test_iris_xe_is_unsupported_with_advice():
    p = load_knowledge().profiles["iris_xe"]
    assert p.supported is False and p.target == "xpu" and not p.has_matrix_engine
    text = " ".join(p.use_instead).lower()
    assert "openvino" in text and "cpu" in text and "supported" in text


def test_search_spaces_follow_the_grf_decision():
    kb = load_knowledge()
    xe2 = kb.search_space_for("xpu", "xe2")
    hpc = kb.search_space_for("xpu", "xe-hpc")
    cuda = kb.search_space_for("cuda")
    assert xe2.id == "xpu_xe2" and hpc.id == "xpu_xehpc" and cuda.id == "cuda"
    for space in (xe2, hpc):
        gemm = space.configs("gemm")
        assert {c.options.get("grf_mode") for c in gemm} >= {"128", "256"}  # both GRF modes swept
        assert {c.num_warps for c in gemm} >= {4, 8, 16, 32}  # warps not forced to 32
        assert any(c.kwargs.get("GROUP_SIZE_M") == 1 for c in gemm)  # no-swizzle fallback kept
        for c in gemm:
            assert "grf_mode" not in c.kwargs and c.all_kwargs()["grf_mode"] in GRF_MODE_VALUES
            if c.options.get("grf_mode") == "256":
                assert c.num_warps <= 32
        assert {c.options.get("warp_size") for c in space.configs("reduction")} == {16, 32}
    for c in cuda.configs("gemm") + cuda.configs("reduction"):
        assert not c.options  # no grf_mode or warp_size on cuda
    with pytest.raises(KeyError, match="conv"):
        cuda.configs("conv")


def test_broken_field_names_file_and_field(kb_copy: Path):
    path = kb_copy / "rules" / "xpu.yaml"
    data = yaml.safe_load(path.read_text())
    data["rules"][2]["stage"] = "warp_magic"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(KnowledgeError) as err:
        load_knowledge(kb_copy)
    assert err.value.file == str(path) and err.value.field == "rules[2].stage"
    assert "xpu.yaml" in str(err.value) and "rules[2].stage" in str(err.value) and "warp_magic" in str(err.value)


def test_broken_hardware_number_names_field(kb_copy: Path):
    path = kb_copy / "hardware" / "arc_b580.yaml"
    data = yaml.safe_load(path.read_text())
    del data["memory_bandwidth_gbps"]["source"]
    data["grf_modes"] = ["default", "huge"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(KnowledgeError) as err:
        load_knowledge(kb_copy)
    assert "arc_b580.yaml" in str(err.value)
    assert err.value.field in ("grf_modes", "memory_bandwidth_gbps.source")


def test_invalid_yaml_and_bad_config_are_reported(kb_copy: Path):
    (kb_copy / "search_spaces" / "cuda.yaml").write_text("id: cuda\nkinds: [unclosed\n")
    with pytest.raises(KnowledgeError, match=r"cuda\.yaml.*not valid YAML \(line"):
        load_knowledge(kb_copy)
    shutil.copy(KNOWLEDGE_ROOT / "search_spaces" / "cuda.yaml", kb_copy / "search_spaces" / "cuda.yaml")
    path = kb_copy / "search_spaces" / "xpu_xe2.yaml"
    data = yaml.safe_load(path.read_text())
    data["kinds"]["gemm"][0]["num_warps"] = 64  # with grf_mode 256
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(KnowledgeError) as err:
        load_knowledge(kb_copy)
    assert err.value.field == "kinds.gemm[0]" and "num_warps > 32" in str(err.value)


def test_unknown_lint_and_missing_example_are_reported(kb_copy: Path):
    path = kb_copy / "rules" / "memory.yaml"
    data = yaml.safe_load(path.read_text())
    data["rules"][0]["lint"] = "lint_does_not_exist"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(KnowledgeError, match=r"rules\[0\]\.lint"):
        load_knowledge(kb_copy)
    data["rules"][0]["lint"] = None
    data["rules"][0]["example"] = {"before_path": "examples/nope.py", "after": "x = 1"}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(KnowledgeError, match=r"rules\[0\]\.example\.before_path"):
        load_knowledge(kb_copy)


def test_rules_filter_by_stage_target_and_version():
    kb = load_knowledge()
    assert all(r.stage == "dtype_fix" for r in kb.rules_for(stage="dtype_fix"))
    xpu_only = {r.id for r in kb.rules_for(target="xpu")} - {r.id for r in kb.rules_for(target="cuda")}
    assert "grf_mode_values" in xpu_only
    assert "block_ptr_removed" not in {r.id for r in kb.rules_for(triton_version="3.6.0")}
    assert "block_ptr_removed" in {r.id for r in kb.rules_for(triton_version="3.9.0")}
    assert version_matches("3.6.0", ">=3.0,<3.9") and not version_matches("3.9.1", "<3.9")
    assert version_matches("3.10.0+git1234", ">=3.9")


def test_installed_triton_probe():
    api = installed_triton_pointer_api()
    import triton
    import triton.language as tl

    assert api["version"] == triton.__version__
    assert api["tensor_descriptor"] == hasattr(tl, "make_tensor_descriptor")
    if version_matches(triton.__version__, "<3.9"):
        assert api["block_ptr"] == hasattr(tl, "make_block_ptr")
    else:
        assert api["block_ptr"] is False
    assert api["preferred"] in ("tensor_descriptor", "block_ptr")


def test_contradictions_document_covers_each_item():
    text = (KNOWLEDGE_ROOT / "contradictions.md").read_text().lower()
    for topic in ("grf_mode", "32 warps", "dpas", "b580", "dangling", "ponte vecchio"):
        assert topic in text, f"contradictions.md does not resolve {topic!r}"


def test_page_helpers_for_the_knowledge_page():
    kb = load_knowledge()
    by_stage = kb.rules_by_stage("xpu")
    assert list(by_stage) == list(STAGE_IDS)
    assert "dot_fp32_accumulate_low_precision_operands" in {r.id for r in by_stage["dtype_fix"]}
    d = kb.rules["swizzle_1d_grid"].to_dict()
    assert "GROUP_SIZE_M" in d["after"] and d["stage"] == "xpu_specific" and "example" not in d
    rows = kb.profiles_table(["arc_b580", "nvidia_h200"])
    table = {r["fact"]: r for r in rows}
    assert table["memory bandwidth (GB/s)"]["arc_b580"] == 456
    assert table["compute units"]["nvidia_h200"] == "132 SMs"
    assert table["peak fp64 (TFLOP/s)"]["arc_b580"] is None
    assert set(rows[0]) == {"fact", "arc_b580", "nvidia_h200"}
    with pytest.raises(KeyError):
        kb.profiles_table(["nope"])
