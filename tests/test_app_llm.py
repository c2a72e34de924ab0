"""The llm engine from the workbench: endpoint, model and a key typed on Home, a proposal from
a local OpenAI-compatible HTTP server (real HTTP, a canned reply), verified by the CoVeR loop and
approved on Optimize; the key reaches the endpoint but never the session's history."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
SECRET = "sk-ui-test-9f8e7d6c5b4a"
UPCAST = "acc += tl.dot(a.to(tl.float32), b.to(tl.float32))"
FIXED = "acc = tl.dot(a, b.to(a.dtype), acc)"


class _Endpoint(BaseHTTPRequestHandler):
    reply_code = ""
    seen: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                "model": body.get("model"), "prompt": body["messages"][-1]["content"]})
        content = ("The upcast bypasses the matrix engines; keep fp16 operands.\n\n```python\n"
                   + type(self).reply_code + "```\n")
        data = json.dumps({
            "id": "cmpl-1", "object": "chat.completion", "created": 0, "model": body.get("model"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endpoint() -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_llm_engine_from_the_pages(endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XEFORGE_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("XEFORGE_DEVICE", "cpu")
    monkeypatch.setenv("XEFORGE_LLM_USE_CACHE", "false")
    monkeypatch.setenv("XEFORGE_LLM_MAX_RETRIES", "0")
    for name in ("OPENAI_API_KEY", "XEFORGE_LLM_API_KEY", "OPENAI_BASE_URL", "XEFORGE_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)

    home = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    home.run()
    home.selectbox(key="home_sample").select("07_gemm_fp32_upcast")
    home.button(key="home_load_sample").click().run()
    home.radio(key="home_engine").set_value("llm").run()
    home.text_input(key="home_endpoint").set_value(endpoint)
    home.text_input(key="home_model").set_value("local-test-model")
    home.text_input(key="home_api_key").set_value(SECRET).run()
    assert any("llm engine ready" in s.value for s in home.success)
    home.button(key="home_start").click().run()
    assert not home.exception, [e.value for e in home.exception]
    wb = home.session_state["workbench"]
    assert wb.settings.engine == "llm" and wb.settings.api_key == SECRET
    _Endpoint.reply_code = wb.session.source("head").replace(UPCAST, FIXED)

    opt = AppTest.from_file(str(ROOT / "pages/1_Optimize.py"), default_timeout=120)
    opt.session_state["workbench"] = wb
    opt.run()
    opt.button(key="opt_propose").click().run()
    job = wb.jobs.current("propose")
    assert job is not None and job.wait(300)
    opt.run()
    assert _Endpoint.seen, "the endpoint was never called"
    call = _Endpoint.seen[-1]
    assert call["path"].endswith("/chat/completions") and call["model"] == "local-test-model"
    assert call["auth"] == f"Bearer {SECRET}"
    assert "dtype_fix" in call["prompt"]
    review = wb.review
    assert review is not None and review.engine == "llm" and review.verdict.passed, wb.last_stage_result
    opt.button(key="opt_approve").click().run()
    head = wb.session.version("head")
    assert head.engine == "llm" and head.model == "local-test-model" and FIXED in wb.session.source("head")
    dump = subprocess.run(["git", "-C", str(wb.session.path), "log", "--all", "-p"],
                          capture_output=True, text=True, check=True).stdout
    assert SECRET not in dump
