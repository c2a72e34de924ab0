"""The llm engine against a real OpenAI-compatible HTTP server on 127.0.0.1 (canned replies)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from xeforge_core.engines import Candidate, EngineError, ProposalContext, get_engine
from xeforge_core.engines.llm import LLMEngine, retry_after_seconds
from xeforge_core.settings import LLMSettings

FIXTURES = Path(__file__).parent / "fixtures" / "codemods"
SECRET = "sk-test-SECRET-0123456789abcdef"


class FakeOpenAI:
    """A chat-completions endpoint serving queued replies: ``(status, body, headers)``; when the
    queue is empty it repeats the last reply. Records every request (path, headers, JSON body)."""

    def __init__(self) -> None:
        self.queue: list[tuple[int, Any, dict[str, str]]] = []
        self.requests: list[dict[str, Any]] = []
        self._last: tuple[int, Any, dict[str, str]] | None = None
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                      "body": body})
                status, payload, headers = fake.queue.pop(0) if fake.queue else fake._last  # type: ignore[misc]
                fake._last = (status, payload, headers)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def reply(self, text: str, *, prompt_tokens: int = 100, completion_tokens: int = 50) -> None:
        self.queue.append((200, {
            "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "canned-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }, {}))

    def error(self, status: int, message: str = "error", headers: dict[str, str] | None = None) -> None:
        self.queue.append((status, {"error": {"message": message, "type": "test", "code": status}}, headers or {}))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    yield fake
    fake.close()


def _engine(endpoint: FakeOpenAI, tmp_path: Path, sleeps: list[float] | None = None, **over: Any) -> LLMEngine:
    settings = LLMSettings(base_url=endpoint.base_url, model="test-model", api_key=SECRET,
                           cache_dir=tmp_path / "llm-cache", max_retries=3, backoff_s=0.01,
                           backoff_max_s=0.5, timeout_s=10, **over)
    record = sleeps if sleeps is not None else []
    return LLMEngine(settings, sleep=record.append)


def _context(stage: str = "dtype_fix") -> ProposalContext:
    src = (FIXTURES / "matmul_fp32_dot.py").read_text()
    return ProposalContext(stage=stage, original_code=src, current_code=src, target="cuda")


def _fenced(code: str, before: str = "Here is the rewrite.", after: str = "I removed the upcasts.") -> str:
    return f"{before}\n\n```python\n{code}```\n\n{after}\n"


def test_reply_with_no_code_is_not_applicable(endpoint: FakeOpenAI, tmp_path: Path) -> None:
    endpoint.reply("I looked at the kernel; it already keeps fp16 operands, so there is nothing to change.")
    engine = _engine(endpoint, tmp_path)
    cand = engine.propose("dtype_fix", _context())
    assert isinstance(cand, Candidate)
    assert not cand.applicable
    assert "no code" in cand.not_applicable_reason
    assert cand.code == _context().current_code
    assert cand.engine == "llm" and cand.model == "canned-model"
    assert cand.prompt and "Data types" in cand.prompt  # rendered from the stage template
    # the prompt went over real HTTP with the stage prompt as the user message
    body = endpoint.requests[0]["body"]
    assert endpoint.requests[0]["path"] == "/v1/chat/completions"
    assert body["model"] == "test-model" and body["messages"][-1]["content"] == cand.prompt
    assert cand.tokens.prompt_tokens == 100 and cand.tokens.completion_tokens == 50


def test_reply_that_is_a_diff_is_rejected_with_reason(endpoint: FakeOpenAI, tmp_path: Path) -> None:
    endpoint.reply("```diff\n--- a/kernel.py\n+++ b/kernel.py\n@@ -1,3 +1,3 @@\n-acc += tl.dot(a, b)\n"
                   "+acc = tl.dot(a, b, acc)\n```\n")
    cand = _engine(endpoint, tmp_path).propose("dtype_fix", _context())
    assert not cand.applicable and "diff" in cand.not_applicable_reason


def test_429_then_500_then_success_with_backoff_and_retry_after(endpoint: FakeOpenAI, tmp_path: Path) -> None:
    fixed = (FIXTURES / "matmul_fixed_tiles.py").read_text()
    endpoint.error(429, "slow down", headers={"retry-after": "0.25"})
    endpoint.error(500, "upstream exploded")
    endpoint.reply(_fenced(fixed), prompt_tokens=321, completion_tokens=123)
    sleeps: list[float] = []
    engine = _engine(endpoint, tmp_path, sleeps)
    cand = engine.propose("dtype_fix", _context())
    assert cand.applicable and cand.code == fixed
    assert len(endpoint.requests) == 3
    # first wait honours Retry-After; the second is exponential backoff (0.01 * 2**1)
    assert sleeps == [pytest.approx(0.25), pytest.approx(0.02)]
    assert [r["error"] for r in engine.retry_log] == ["HTTP 429", "HTTP 500"]
    assert cand.tokens.calls == 3 and cand.tokens.prompt_tokens == 321
    usage = engine.usage_by_stage["dtype_fix"]
    assert (usage.prompt_tokens, usage.completion_tokens, usage.calls) == (321, 123, 3)
    assert cand.rationale.startswith("Here is the rewrite.")


def test_retries_exhausted_and_non_retryable_errors(endpoint: FakeOpenAI, tmp_path: Path) -> None:
    for _ in range(4):
        endpoint.error(503, "busy")
    sleeps: list[float] = []
    engine = _engine(endpoint, tmp_path, sleeps)
    with pytest.raises(EngineError, match="failed after 4 attempts"):
        engine.propose("dtype_fix", _context())
    assert sleeps == [pytest.approx(0.01), pytest.approx(0.02), pytest.approx(0.04)]
    endpoint.queue.clear()
    endpoint.error(400, "bad request")
    n = len(endpoint.requests)
    with pytest.raises(EngineError, match="HTTP 400"):
        _engine(endpoint, tmp_path).propose("fusion", _context("fusion"))
    assert len(endpoint.requests) == n + 1  # not retried


def test_cached_replay_makes_no_request_and_spends_no_tokens(endpoint: FakeOpenAI, tmp_path: Path) -> None:
    fixed = (FIXTURES / "matmul_fixed_tiles.py").read_text()
    endpoint.reply(_fenced(fixed))
    first = _engine(endpoint, tmp_path).propose("dtype_fix", _context())
    again = _engine(endpoint, tmp_path)  # a new engine (e.g. after a restart) on the same cache
    second = again.propose("dtype_fix", _context())
    assert len(endpoint.requests) == 1
    assert not first.cached and second.cached
    assert second.code == first.code and second.tokens.calls == 0
    assert again.usage_by_stage == {} and again.total_usage.total_tokens == 0
    # a different temperature is a different request
    _engine(endpoint, tmp_path, temperature=0.7).propose("dtype_fix", _context())
    assert len(endpoint.requests) == 2
    # best-of-k: asking again on the same engine is a new sample; a replay returns the same samples
    other = (FIXTURES / "matmul_fp32_dot.py").read_text().replace("BLOCK_K=32", "BLOCK_K=64")
    endpoint.reply(_fenced(other))
    third = again.propose("dtype_fix", _context())
    assert len(endpoint.requests) == 3 and not third.cached and third.code == other
    replay = _engine(endpoint, tmp_path)
    codes = [replay.propose("dtype_fix", _context()).code for _ in range(2)]
    assert codes == [first.code, other] and len(endpoint.requests) == 3


def test_api_key_never_in_logs_cache_errors_or_repr(endpoint: FakeOpenAI, tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fixed = (FIXTURES / "matmul_fixed_tiles.py").read_text()
    endpoint.error(500, f"internal error for key {SECRET}")
    endpoint.reply(_fenced(fixed))
    engine = _engine(endpoint, tmp_path)
    cand = engine.propose("dtype_fix", _context())
    assert cand.applicable
    # the key did go to the server (as a bearer token) ...
    assert endpoint.requests[0]["headers"].get("authorization") == f"Bearer {SECRET}"
    # ... and nowhere else
    endpoint.error(401, f"Incorrect API key provided: {SECRET}")
    with pytest.raises(EngineError) as info:
        _engine(endpoint, tmp_path, temperature=0.9).propose("dtype_fix", _context())
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
    assert info.value.__cause__ is None and info.value.__context__ is not None
    assert SECRET not in caplog.text
    assert "llm request" in caplog.text  # our log lines were captured
    assert SECRET not in repr(engine) and SECRET not in repr(engine.settings)
    assert SECRET not in json.dumps(engine.settings.safe_dict())
    assert SECRET not in json.dumps(cand.to_dict())
    import diskcache

    with diskcache.Cache(str(tmp_path / "llm-cache")) as cache:
        keys = list(cache.iterkeys())
        assert keys
        for key in keys:
            assert SECRET not in str(key)
            assert SECRET not in json.dumps(cache.get(key))
    for blob in (tmp_path / "llm-cache").rglob("*"):
        if blob.is_file():
            assert SECRET.encode() not in blob.read_bytes()


def test_settings_from_environment_and_dotenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for var in ("XEFORGE_LLM_API_KEY", "OPENAI_API_KEY", "XEFORGE_LLM_MODEL", "XEFORGE_LLM_BASE_URL",
                "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / ".env").write_text("XEFORGE_LLM_MODEL=from-dotenv\nOPENAI_API_KEY=sk-dotenv-key-000\n"
                                   "XEFORGE_LLM_BASE_URL=http://127.0.0.1:9/v1/\n")
    s = LLMSettings()
    assert s.model == "from-dotenv" and s.key_value() == "sk-dotenv-key-000"
    assert s.base_url == "http://127.0.0.1:9/v1"
    monkeypatch.setenv("XEFORGE_LLM_MODEL", "from-env")
    monkeypatch.setenv("XEFORGE_LLM_TEMPERATURE", "0.5")
    s = LLMSettings()
    assert s.model == "from-env" and s.temperature == 0.5
    engine = get_engine("llm", model="passed-in", max_tokens=123)
    assert engine.settings.model == "passed-in" and engine.settings.max_tokens == 123
    with pytest.raises(ValueError):
        LLMSettings(base_url="ftp://nope")


def test_retry_after_parsing() -> None:
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None
