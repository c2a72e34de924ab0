"""What the user chose survives reruns and page switches (Streamlit AppTest, real pages through
``app.py``'s navigation): the Home load tab, the paste boxes and the session picked to resume;
and loading another kernel never leaves the pages showing one kernel's problem with another
kernel's session: the old session is closed (it stays in the workspace), and the new one is what
the sidebar and "Go to Optimize" show once it is started."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
KERNEL = (ROOT / "sample_kernels" / "01_vector_add.py").read_text()
SPEC = (ROOT / "sample_kernels" / "01_vector_add.yaml").read_text()


def _ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def _sidebar(at: AppTest) -> str:
    return "\n".join(c.value for c in at.sidebar.caption)


def _load_sample(at: AppTest, name: str) -> None:
    at.selectbox(key="home_sample").select(name)
    _ok(at.button(key="home_load_sample").click().run())


def test_the_load_tab_and_the_paste_boxes_survive_a_load_and_a_page_switch(home_app: AppTest) -> None:
    home = home_app
    home.session_state["home_load_tab"] = "Paste"  # what a click on the tab leaves in the state
    _ok(home.run())
    home.text_area(key="home_paste_src").set_value(KERNEL)
    home.text_area(key="home_paste_spec").set_value(SPEC)
    _ok(home.button(key="home_load_paste").click().run())  # loads, then st.rerun()
    wb = home.session_state["workbench"]
    assert wb.loaded is not None and wb.loaded.source == KERNEL
    assert home.session_state["home_load_tab"] == "Paste"
    _ok(home.switch_page("pages/2_History.py").run())
    _ok(home.switch_page("app.py").run())
    assert home.session_state["home_load_tab"] == "Paste"
    assert home.text_area(key="home_paste_src").value == KERNEL
    assert home.text_area(key="home_paste_spec").value == SPEC


def test_the_session_picked_to_resume_survives_reruns_and_new_sessions(home_app: AppTest) -> None:
    home = home_app
    _load_sample(home, "01_vector_add")
    _ok(home.button(key="home_start").click().run())
    first = home.session_state["workbench"].session.path
    _load_sample(home, "03_row_softmax")
    _ok(home.button(key="home_start").click().run())
    picker = home.selectbox(key="home_resume_pick")
    assert len(picker.options) == 2
    picker.select(str(first))
    _ok(home.run())
    _load_sample(home, "06_sum_reduction")
    _ok(home.button(key="home_start").click().run())  # a third session: the list changes
    assert home.selectbox(key="home_resume_pick").value == str(first)
    _ok(home.switch_page("pages/2_History.py").run())
    _ok(home.switch_page("app.py").run())
    assert home.selectbox(key="home_resume_pick").value == str(first)
    _ok(home.button(key="home_resume").click().run())
    assert home.session_state["workbench"].session.path == first


def test_loading_another_kernel_closes_the_open_session_and_the_new_one_is_shown(home_app: AppTest) -> None:
    home = home_app
    _load_sample(home, "01_vector_add")
    _ok(home.button(key="home_start").click().run())
    wb = home.session_state["workbench"]
    old = wb.session
    assert "01_vector_add · 1 version" in _sidebar(home)

    _load_sample(home, "03_row_softmax")
    assert wb.session is None and wb.loaded.name == "03_row_softmax"
    assert "none for the loaded kernel `03_row_softmax`" in _sidebar(home)
    assert "The session 01_vector_add (another kernel) is closed" in "\n".join(i.value for i in home.info)
    assert not [p for p in home.get("page_link") if "Optimize" in p.proto.label]  # no way into the old one
    assert (old.path / ".git").is_dir()  # it stays in the workspace

    _ok(home.button(key="home_start").click().run())
    assert wb.session is not None and wb.session.name == "03_row_softmax" and wb.session.path != old.path
    assert "03_row_softmax · 1 version" in _sidebar(home)
    links = [p for p in home.get("page_link") if "Optimize" in p.proto.label]
    assert links and links[0].proto.page.endswith("Optimize")
    _ok(home.switch_page("pages/1_Optimize.py").run())
    assert any("03_row_softmax" in c for c in _sidebar(home).splitlines())

    # loading the same kernel again keeps its session open
    _ok(home.switch_page("app.py").run())
    _load_sample(home, "03_row_softmax")
    assert wb.session is not None and wb.session.name == "03_row_softmax"
