"""Checks of pasted and uploaded input (xeforge_core.ui.validate) and the workbench keeping
what was loaded when new input is bad."""

from __future__ import annotations

from pathlib import Path

import pytest

from xeforge_core.ui.validate import (
    InputError,
    check_kernel_source,
    check_spec_text,
    decode_upload,
    load_user_problem,
)
from xeforge_core.ui.workbench import Workbench

SAMPLES = Path(__file__).resolve().parents[1] / "sample_kernels"
KERNEL = (SAMPLES / "01_vector_add.py").read_text()
SPEC = (SAMPLES / "01_vector_add.yaml").read_text()


def test_good_kernel_and_spec_load() -> None:
    loaded = load_user_problem(KERNEL, name="vector add", spec_text=SPEC)
    assert loaded.name == "vector_add"
    assert "ci" in loaded.problem.spec.variants


@pytest.mark.parametrize("text, expected", [
    ("", "empty"),
    ("   \n\t\n", "empty"),
    ("def f(:\n  pass\n", "not valid Python"),
    ("import torch\n\ndef get_inputs():\n    return []\n", "no `Model` class"),
    ("x = 1\n" * 1_000_000, "limit"),
    ("class Model:\x00\n", "NUL"),
])
def test_bad_kernel_text(text: str, expected: str) -> None:
    with pytest.raises(InputError, match=expected):
        check_kernel_source(text)


def test_syntax_error_names_the_line() -> None:
    with pytest.raises(InputError) as info:
        check_kernel_source("class Model:\n    pass\n\ndef f(:\n")
    assert info.value.line == 4 and "line 4" in str(info.value)


def test_unknown_dim_in_spec_names_the_field() -> None:
    bad = SPEC.replace("shape: [TOKENS, HIDDEN]\n    dtype: float16\n  Y",
                       "shape: [TOKENS, WIDTH]\n    dtype: float16\n  Y")
    with pytest.raises(InputError) as info:
        load_user_problem(KERNEL, spec_text=bad)
    assert "WIDTH" in str(info.value) and "inputs.X.shape" in str(info.value)


def test_spec_that_is_not_a_mapping_or_not_yaml() -> None:
    with pytest.raises(InputError, match="YAML mapping"):
        check_spec_text("- just\n- a list\n")
    with pytest.raises(InputError, match="not valid YAML"):
        check_spec_text("inputs: [unclosed\n")
    assert check_spec_text("  \n") is None


def test_uploads_binary_empty_and_large() -> None:
    with pytest.raises(InputError, match="binary"):
        decode_upload(b"\x7fELF\x02\x01\x01\x00\x00\x00", name="a.out")
    with pytest.raises(InputError, match="not UTF-8 text: byte 0xff at offset 0, line 1"):
        decode_upload(b"\xff\xfe\xfa\x80" * 10, name="kernel.py")
    with pytest.raises(InputError, match=r"byte 0xe9 at offset 18, line 2 \(a file saved in another encoding"):
        decode_upload(b"import torch\n# Jos\xe9\n", name="latin1.py")
    with pytest.raises(InputError, match=r"byte 0xe9 at offset 21, line 2 "):  # after a byte-order mark
        decode_upload(b"\xef\xbb\xbfimport torch\n# Jos\xe9\n", name="bom.py")
    with pytest.raises(InputError, match="empty"):
        decode_upload(b"", name="kernel.py")
    with pytest.raises(InputError, match=r"5\.0 MiB \(5,242,880 bytes\); the limit is 512\.0 KiB \(524,288 bytes\)"):
        decode_upload(b"#" * (5 * 1024 * 1024), name="kernel.py")
    assert decode_upload(KERNEL.encode(), name="k.py") == KERNEL


def test_workbench_keeps_loaded_problem_on_bad_input(tmp_path: Path) -> None:
    wb = Workbench(tmp_path)
    wb.load_text(KERNEL, spec_text=SPEC, name="vadd")
    good = wb.loaded
    for bad in ("", "not python at all (", "x = 1\n", "a" * (5 * 1024 * 1024)):
        with pytest.raises(InputError):
            wb.load_text(bad)
    with pytest.raises(InputError):
        wb.load_upload("blob.py", bytes(range(256)))
    with pytest.raises(InputError):
        wb.load_text(KERNEL, spec_text=SPEC.replace("HIDDEN: 100", "HIDDENX: 100"))
    assert wb.loaded is good and wb.loaded.name == "vadd"
