"""The llm engine: candidates from any OpenAI-compatible chat-completions endpoint.

* Settings (base URL, model, key, temperature, max tokens, timeout, retries, backoff, cache)
  come from :class:`xeforge_core.settings.LLMSettings`: environment, ``.env``, or passed in.
* The prompt is the stage's prompt (``render_stage_prompt``: ``stages.render_prompt`` over the
  context), with the last verdict's feedback when the CoVeR loop asks for a refinement.
* Retries are ours, explicit and testable: the openai SDK's own retries are off
  (``max_retries=0``); a 429, a 5xx, a 408/409, a timeout or a connection error is retried up to
  ``max_retries`` times after ``backoff_s * 2**n`` seconds, or the server's ``Retry-After`` /
  ``retry-after-ms`` when it sends one, never more than ``backoff_max_s``. Other HTTP errors
  (400, 401, 404, ...) fail at once with :class:`EngineError`.
* Replies are cached in diskcache, keyed by endpoint, model, messages, temperature and max
  tokens (a SHA-256 of them): a replay costs no request and no tokens.
* Token accounting per stage: ``usage_by_stage[stage]`` and ``total_usage`` count only tokens
  actually spent (cache hits are free); each candidate carries the usage of its reply.
* The API key is used only to build the HTTP client: it is never part of a cache key or value,
  a log line, an exception text or a ``repr``; error texts are scrubbed of it.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xeforge_core.engines.base import (
    Candidate,
    EngineError,
    ProposalContext,
    TokenUsage,
    render_stage_prompt,
)
from xeforge_core.engines.extract import extract_code, reply_prose
from xeforge_core.settings import LLMSettings, load_llm_settings

log = logging.getLogger("xeforge.llm")

DEFAULT_SYSTEM_PROMPT = (
    "You are an expert in Triton GPU kernels for Intel Xe GPUs (and NVIDIA GPUs). You rewrite a "
    "kernel module for one optimization stage at a time. Answer with the complete, runnable Python "
    "module in a single ```python code block (imports, kernels, launcher, Model, get_inputs, "
    "get_init_inputs), followed by a short explanation of what you changed and why. Never answer "
    "with a diff or a fragment."
)

_RETRY_STATUS = {408, 409, 429}
_SK_PATTERN = re.compile(r"\bsk-[A-Za-z0-9_\-*]{6,}")


@dataclass
class LLMReply:
    """One chat-completion reply: ``text`` (may be empty), token counts, the model that
    answered, ``finish_reason``, whether it came from the cache, and the number of HTTP requests
    made for it (0 for a cache hit)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""
    finish_reason: str | None = None
    cached: bool = False
    requests: int = 0


def retry_after_seconds(headers: Any) -> float | None:
    """Delay the server asks for, in seconds, from ``retry-after-ms`` or ``Retry-After``
    (seconds or an HTTP date); ``None`` when absent or unreadable."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
        value = headers.get("retry-after")
    except Exception:
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class LLMEngine:
    """Candidates from an OpenAI-compatible endpoint.

    ``settings``: an :class:`LLMSettings` (default: environment and ``.env``); keyword
    ``overrides`` (``model=...``, ``base_url=...``, ``temperature=...``, ...) replace single
    settings. ``sleep`` is the function used to wait between retries (seconds). ``cache`` is
    any mapping-like store with ``get``/``set`` (default: a ``diskcache.Cache`` in
    ``settings.resolved_cache_dir()``).
    """

    name = "llm"

    def __init__(self, settings: LLMSettings | None = None, *, sleep: Callable[[float], None] = time.sleep,
                 cache: Any = None, **overrides: Any) -> None:
        overrides = {k: v for k, v in overrides.items() if v is not None}
        if settings is None:
            settings = load_llm_settings(**overrides)
        elif overrides:
            settings = LLMSettings(**{**settings.model_dump(), **overrides})
        self.settings = settings
        self._sleep = sleep
        self._cache = cache
        self._client: Any = None
        self.usage_by_stage: dict[str, TokenUsage] = {}
        self.total_usage = TokenUsage()
        self.retry_log: list[dict[str, Any]] = []
        self._samples: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"LLMEngine(base_url={self.settings.base_url!r}, model={self.settings.model!r})"

    # -- plumbing ------------------------------------------------------------------------
    def _redact(self, text: str) -> str:
        if self.settings.has_key():
            secret = self.settings.key_value()
            if len(secret) >= 4:
                text = text.replace(secret, "***")
        return _SK_PATTERN.sub("sk-***", text)

    def _client_obj(self) -> Any:
        if self._client is None:
            import openai

            self._client = openai.OpenAI(base_url=self.settings.base_url, api_key=self.settings.key_value(),
                                         max_retries=0, timeout=self.settings.timeout_s)
        return self._client

    def _cache_obj(self) -> Any:
        if self._cache is None and self.settings.use_cache:
            import diskcache

            directory = self.settings.resolved_cache_dir()
            directory.mkdir(parents=True, exist_ok=True)
            self._cache = diskcache.Cache(str(directory))
        return self._cache

    def close(self) -> None:
        """Close the HTTP client and the cache (safe to call twice)."""
        if self._client is not None:
            try:
                self._client.close()
            finally:
                self._client = None
        cache, self._cache = self._cache, None
        if cache is not None and hasattr(cache, "close"):
            cache.close()

    def messages_for(self, prompt: str) -> list[dict[str, str]]:
        """The chat messages sent for ``prompt`` (system prompt + the stage prompt)."""
        return [{"role": "system", "content": self.settings.system_prompt or DEFAULT_SYSTEM_PROMPT},
                {"role": "user", "content": prompt}]

    def cache_key(self, messages: list[dict[str, str]], sample: int = 0) -> str:
        """``llm:<sha256>`` of endpoint, model, messages, temperature and max tokens (no key).
        ``sample`` > 0 numbers repeated requests for the same prompt (best-of-k), so each gets
        its own reply and a replay returns the same k replies in the same order."""
        payload: dict[str, Any] = {"endpoint": self.settings.base_url, "model": self.settings.model,
                                   "messages": messages, "temperature": self.settings.temperature,
                                   "max_tokens": self.settings.max_tokens}
        if sample:
            payload["sample"] = sample
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        return f"llm:{digest}"

    # -- requests ------------------------------------------------------------------------
    def _retryable(self, exc: Exception) -> tuple[bool, float | None, str]:
        import openai

        if isinstance(exc, openai.APITimeoutError):
            return True, None, "timeout"
        if isinstance(exc, openai.APIConnectionError):
            return True, None, "connection error"
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            headers = getattr(exc.response, "headers", None)
            if status in _RETRY_STATUS or status >= 500:
                return True, retry_after_seconds(headers), f"HTTP {status}"
            return False, None, f"HTTP {status}"
        return False, None, type(exc).__name__

    def _request(self, messages: list[dict[str, str]], stage: str) -> LLMReply:
        s = self.settings
        attempts = s.max_retries + 1
        last = ""
        for attempt in range(attempts):
            log.info("llm request: endpoint=%s model=%s stage=%s attempt=%d/%d", s.base_url, s.model,
                     stage or "-", attempt + 1, attempts)
            try:
                resp = self._client_obj().chat.completions.create(
                    model=s.model, messages=messages, temperature=s.temperature, max_tokens=s.max_tokens,
                    timeout=s.timeout_s)
            except Exception as exc:
                retry, wait, what = self._retryable(exc)
                last = f"{what}: {self._redact(str(exc))}"
                if not retry:
                    raise EngineError(f"the LLM endpoint {s.base_url} refused the request ({last})") from None
                if attempt + 1 >= attempts:
                    break
                delay = wait if wait is not None else s.backoff_s * (2 ** attempt)
                delay = min(delay, s.backoff_max_s)
                self.retry_log.append({"attempt": attempt + 1, "error": what, "delay_s": delay,
                                       "retry_after": wait is not None})
                log.warning("llm request failed (%s); retrying in %.2f s", what, delay)
                self._sleep(delay)
                continue
            choice = resp.choices[0] if getattr(resp, "choices", None) else None
            text = (choice.message.content if choice is not None and choice.message is not None else "") or ""
            usage = getattr(resp, "usage", None)
            return LLMReply(text=text,
                            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                            model=str(getattr(resp, "model", "") or s.model),
                            finish_reason=getattr(choice, "finish_reason", None), requests=attempt + 1)
        raise EngineError(f"the LLM endpoint {s.base_url} failed after {attempts} attempts (last: {last})")

    def complete(self, prompt: str, *, stage: str = "") -> LLMReply:
        """The reply to ``prompt`` (from the cache when allowed and present). The n-th request
        for the same prompt on this engine is the n-th sample (its own cache entry), so best-of-k
        gets k replies. Accounts tokens spent to ``stage``. Raises :class:`EngineError` when the endpoint keeps failing or
        refuses the request; its text never holds the key."""
        messages = self.messages_for(prompt)
        base = self.cache_key(messages)
        sample = self._samples.get(base, 0)
        self._samples[base] = sample + 1
        key = self.cache_key(messages, sample)
        cache = self._cache_obj() if self.settings.use_cache else None
        if cache is not None:
            hit = cache.get(key)
            if isinstance(hit, dict) and "text" in hit:
                log.info("llm cache hit: endpoint=%s model=%s stage=%s", self.settings.base_url,
                         self.settings.model, stage or "-")
                return LLMReply(text=hit["text"], prompt_tokens=hit.get("prompt_tokens", 0),
                                completion_tokens=hit.get("completion_tokens", 0), model=hit.get("model", ""),
                                finish_reason=hit.get("finish_reason"), cached=True, requests=0)
        reply = self._request(messages, stage)
        spent = TokenUsage(reply.prompt_tokens, reply.completion_tokens, calls=reply.requests)
        self.usage_by_stage.setdefault(stage or "-", TokenUsage()).add(spent)
        self.total_usage.add(spent)
        if cache is not None and reply.text.strip():
            cache.set(key, {"text": reply.text, "prompt_tokens": reply.prompt_tokens,
                            "completion_tokens": reply.completion_tokens, "model": reply.model,
                            "finish_reason": reply.finish_reason, "endpoint": self.settings.base_url,
                            "stored_at": time.time()})
        return reply

    # -- the engine protocol -------------------------------------------------------------
    def propose(self, stage: str, context: ProposalContext, feedback: str | None = None) -> Candidate:
        """Ask the endpoint for ``stage``'s rewrite of ``context.current_code``.

        Returns a candidate, or a not-applicable one when the reply holds no usable module
        (with the extraction's reason). Raises :class:`EngineError` when the endpoint fails."""
        prompt = render_stage_prompt(stage, context, feedback)
        reply = self.complete(prompt, stage=stage)
        tokens = TokenUsage(reply.prompt_tokens, reply.completion_tokens, calls=reply.requests)
        model = reply.model or self.settings.model
        got = extract_code(reply.text)
        common = {"engine": self.name, "model": model, "prompt": prompt, "tokens": tokens, "stage": stage,
                  "raw_reply": reply.text, "cached": reply.cached}
        if got.code is None:
            reason = got.reason
            if reply.finish_reason == "length":
                reason += f" (the reply hit the {self.settings.max_tokens}-token limit)"
            return Candidate.not_applicable(code=context.current_code, reason=reason, **common)
        notes = list(got.notes)
        if reply.finish_reason == "length":
            notes.append(f"the reply hit the {self.settings.max_tokens}-token limit")
        rationale = reply_prose(reply.text, got) or f"{model} proposal for stage {stage}"
        return Candidate(code=got.code, rationale=rationale, notes=notes, **common)
