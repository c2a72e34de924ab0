"""The spec at load and inside a session (Streamlit AppTest, no kernel runs): a correctness
variant too big for Triton's interpreter is said when the problem is loaded, with a smaller
``ci`` offered and written into the spec (and the paste box) on request; the spec is editable
inside the session, as a new version of it, and a misspelt key there is refused with its line
while nothing changes."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
GEMM = (ROOT / "sample_kernels" / "07_gemm_fp32_upcast.py").read_text()
SPEC = (ROOT / "sample_kernels" / "07_gemm_fp32_upcast.yaml").read_text()
BIG = SPEC.replace("      M: 40\n      K: 72\n      N: 48", "      M: 1024\n      K: 8192\n      N: 8192")


def _ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def _button(at: AppTest, key: str):  # noqa: ANN202
    found = [b for b in at.button if b.key == key]
    assert found, f"no button {key}"
    return found[0]


def test_an_oversized_ci_is_said_at_load_and_a_smaller_one_is_offered(home_app: AppTest) -> None:
    home = home_app
    assert BIG != SPEC
    home.text_area(key="home_paste_src").set_value(GEMM)
    home.text_area(key="home_paste_spec").set_value(BIG)
    _ok(home.button(key="home_load_paste").click().run())
    wb = home.session_state["workbench"]
    assert wb.loaded.problem.spec.variants["ci"].dims["K"] == 8192  # loaded as given, and then said:
    warning = "\n".join(w.value for w in home.warning)
    assert "Correctness variant `ci` needs 137.4 GFLOP per call" in warning and "refuses it" in warning
    assert "M 1024->128, K 8192->1024, N 8192->1024" in warning
    table = next(d.value for d in home.dataframe if "on the interpreter" in d.value.columns)
    assert table.set_index("variant").loc["ci", "on the interpreter"] == "✗ refused"

    _ok(_button(home, "home_use_ci").click().run())
    assert wb.loaded.problem.spec.variants["ci"].dims == {"M": 128, "K": 1024, "N": 1024}
    assert "      M: 128\n      K: 1024\n      N: 1024" in home.text_area(key="home_paste_spec").value
    assert not any("Correctness variant" in w.value for w in home.warning)
    _ok(home.button(key="home_start").click().run())
    assert wb.session.problem("head").spec.variants["ci"].dims["K"] == 1024


def test_the_spec_is_editable_inside_the_session(home_app: AppTest) -> None:
    home = home_app
    home.selectbox(key="home_sample").select("07_gemm_fp32_upcast")
    _ok(home.button(key="home_load_sample").click().run())
    _ok(home.button(key="home_start").click().run())
    wb = home.session_state["workbench"]
    session = wb.session

    opt = AppTest.from_file(str(ROOT / "pages" / "1_Optimize.py"), default_timeout=120)
    opt.session_state["workbench"] = wb
    _ok(opt.run())
    editor = next(t for t in opt.text_area if t.key.startswith("opt_spec_"))
    assert editor.value == SPEC
    editor.set_value(SPEC.replace("    dims:\n      M: 40", "    dimz:\n      M: 40"))
    _ok(_button(opt, "opt_spec_save").click().run())
    assert "Spec not saved: spec, line 14: field `ci[0].dimz`: unknown key 'dimz'" in \
        "\n".join(e.value for e in opt.error)
    assert len(session.history()) == 1  # nothing changed

    editor = next(t for t in opt.text_area if t.key.startswith("opt_spec_"))
    editor.set_value(SPEC.replace("      M: 40\n", "      M: 24\n"))
    _ok(_button(opt, "opt_spec_save").click().run())
    head = session.version("head")
    assert (head.index, head.stage, head.engine) == (1, "spec", "manual")
    assert session.source("head") == session.source("baseline")  # the kernel is unchanged
    assert session.problem("head").spec.variants["ci"].dims["M"] == 24
    assert session.problem("baseline").spec.variants["ci"].dims["M"] == 40  # history keeps the old contract
    assert wb.loaded.problem.spec.variants["ci"].dims["M"] == 24 and wb.session is session
