"""Bad input on the Home page gives a clear message on the page; the loaded kernel and the open
session stay as they were (nothing saved is lost, nothing else breaks)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
SAMPLES = ROOT / "sample_kernels"
KERNEL = (SAMPLES / "01_vector_add.py").read_text()
SPEC = (SAMPLES / "01_vector_add.yaml").read_text()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppTest]:
    """The Home page with a sample loaded and a session started, shared by the tests of this
    module in order: each bad input must leave it exactly as it was (the last test then loads a
    good upload)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("XEFORGE_WORKSPACE", str(tmp_path_factory.mktemp("ws")))
    mp.setenv("XEFORGE_DEVICE", "cpu")
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.selectbox(key="home_sample").select("01_vector_add")
    at.button(key="home_load_sample").click().run()
    at.button(key="home_start").click().run()
    wb = at.session_state["workbench"]
    assert wb.session is not None and wb.loaded.name == "01_vector_add"
    yield at
    mp.undo()


def _errors(at: AppTest) -> str:
    return "\n".join(e.value for e in at.error)


def _unchanged(at: AppTest) -> None:
    wb = at.session_state["workbench"]
    assert wb.loaded.name == "01_vector_add"
    assert wb.session is not None and len(wb.session.history()) == 1
    assert wb.session.source("baseline") == KERNEL
    assert not at.exception, [e.value for e in at.exception]
    assert any("Problem: 01_vector_add" in h.value for h in at.subheader)


def _paste(at: AppTest, source: str, spec: str = "") -> AppTest:
    at.text_area(key="home_paste_src").set_value(source)
    at.text_area(key="home_paste_spec").set_value(spec)
    return at.button(key="home_load_paste").click().run()


@pytest.mark.parametrize("source, message", [
    ("this is not python (at all", "not valid Python"),
    ("", "the kernel is empty"),
    ("import torch\n\ndef get_inputs():\n    return [torch.ones(3)]\n", "no `Model` class"),
])
def test_bad_paste(home: AppTest, source: str, message: str) -> None:
    _paste(home, source)
    assert message in _errors(home)
    _unchanged(home)


def test_five_megabyte_paste(home: AppTest) -> None:
    _paste(home, "# padding\n" * (5 * 1024 * 1024 // 10))
    assert "the limit is" in _errors(home)
    _unchanged(home)


def test_579_kb_paste_names_its_size_and_the_limit(home: AppTest) -> None:
    """The reported case: a 579 KB paste over the 512 KiB limit. The box keeps the text (no
    max_chars truncation), a caption says it is over the limit before Load, and Load refuses it
    with both sizes; what was loaded stays."""
    big = (KERNEL * 1000)[:579_000]
    home.text_area(key="home_paste_src").set_value(big).run()
    assert "565.4 KiB (579,000 bytes): over the limit of 512.0 KiB (524,288 bytes)" in \
        "\n".join(c.value for c in home.caption)
    _paste(home, big)
    assert ("pasted kernel: the kernel is 565.4 KiB (579,000 bytes); the limit is 512.0 KiB "
            "(524,288 bytes)") in _errors(home)
    assert home.text_area(key="home_paste_src").value == big
    _unchanged(home)
    _paste(home, "")


def test_oversized_upload_is_refused_on_arrival(home: AppTest) -> None:
    # the widget states the limit applied (Streamlit's own is in whole MB: 1 MB, the transport cap)
    assert home.file_uploader(key="home_up_py").label == "Kernel (.py, at most 512.0 KiB)"
    assert home.file_uploader(key="home_up_yaml").label == "Spec (.yaml, optional, at most 256.0 KiB)"
    assert home.file_uploader(key="home_up_py").proto.max_upload_size_mb == 1
    data = b"# pad\n" * 100_000
    home.file_uploader(key="home_up_py").set_value(("huge.py", data, "text/x-python")).run()
    assert "uploaded file huge.py: the file is 585.9 KiB (600,000 bytes); the limit is 512.0 KiB" in _errors(home)
    home.button(key="home_load_upload").click().run()
    assert "the limit is 512.0 KiB (524,288 bytes)" in _errors(home)
    _unchanged(home)


def test_spec_with_unknown_dim(home: AppTest) -> None:
    bad = SPEC.replace("shape: [TOKENS, HIDDEN]\n    dtype: float16\n  Y",
                       "shape: [TOKENS, WIDTH]\n    dtype: float16\n  Y")
    _paste(home, KERNEL, bad)
    errors = _errors(home)
    assert "WIDTH" in errors and "inputs.X.shape" in errors
    _unchanged(home)


@pytest.mark.parametrize("typo, line, says", [
    ("bench_gpu:", 19, "field `bench_gpu`: unknown top-level key 'bench_gpu'; did you mean 'bench-gpu'?"),
    ("    dtpye: float16\n  Y:", 5, "field `inputs.X.dtpye`: unknown key 'dtpye' in input X; did you mean 'dtype'?"),
    ("    dimz:\n      TOKENS: 7", 13, "field `ci[0].dimz`: unknown key 'dimz' in variant ci; did you mean 'dims'?"),
])
def test_a_misspelt_spec_key_is_refused_with_its_line(home: AppTest, typo: str, line: int, says: str) -> None:
    fixed = {"bench_gpu:": "bench-gpu:", "    dtpye: float16\n  Y:": "    dtype: float16\n  Y:",
             "    dimz:\n      TOKENS: 7": "    dims:\n      TOKENS: 7"}[typo]
    assert SPEC.count(fixed) >= 1
    bad = SPEC.replace(fixed, typo, 1)
    _paste(home, KERNEL, bad)
    assert f"Not loaded: spec, line {line}: {says}" in _errors(home)
    _unchanged(home)
    # both boxes keep what was pasted, so the typo is fixed in place
    assert home.text_area(key="home_paste_src").value == KERNEL
    assert home.text_area(key="home_paste_spec").value == bad


def test_binary_upload(home: AppTest) -> None:
    home.file_uploader(key="home_up_py").set_value(("kernel.py", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)),
                                                    "text/x-python"))
    home.button(key="home_load_upload").click().run()
    assert "binary file" in _errors(home)
    _unchanged(home)


def test_upload_without_model_then_good_upload(home: AppTest) -> None:
    home.file_uploader(key="home_up_py").set_value(("helpers.py", b"def f():\n    return 1\n", "text/x-python"))
    home.button(key="home_load_upload").click().run()
    assert "no `Model` class" in _errors(home)
    _unchanged(home)
    home.file_uploader(key="home_up_py").set_value(("vadd.py", KERNEL.encode(), "text/x-python"))
    home.file_uploader(key="home_up_yaml").set_value(("vadd.yaml", SPEC.encode(), "application/x-yaml"))
    home.button(key="home_load_upload").click().run()
    wb = home.session_state["workbench"]
    assert not _errors(home) and wb.loaded.name == "vadd" and "ci" in wb.loaded.problem.spec.variants
    assert wb.session.source("baseline") == KERNEL  # the open session is untouched
