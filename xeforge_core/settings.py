"""LLM endpoint settings: any OpenAI-compatible endpoint, from the environment, a ``.env`` file,
or values passed in.

Environment variables (a ``.env`` file in the working directory is read too; real environment
variables win over it, values passed to the constructor win over both):

=============================  ==================================================  ============
``XEFORGE_LLM_BASE_URL``       endpoint base URL (``OPENAI_BASE_URL`` also read)   OpenAI's
``XEFORGE_LLM_MODEL``          model id                                            ``gpt-4o``
``XEFORGE_LLM_API_KEY``        API key (``OPENAI_API_KEY`` also read)              none
``XEFORGE_LLM_TEMPERATURE``    sampling temperature                                0.2
``XEFORGE_LLM_MAX_TOKENS``     completion token limit                              8192
``XEFORGE_LLM_TIMEOUT_S``      per-request timeout, seconds                        180
``XEFORGE_LLM_MAX_RETRIES``    retries after a 429/5xx/timeout/connection error    4
``XEFORGE_LLM_BACKOFF_S``      first backoff delay, seconds (doubles each retry)   2.0
``XEFORGE_LLM_BACKOFF_MAX_S``  longest single delay, seconds (caps Retry-After)    60
``XEFORGE_LLM_CACHE_DIR``      reply cache directory                               ~/.cache/xeforge/llm
``XEFORGE_LLM_USE_CACHE``      reuse cached replies                                true
=============================  ==================================================  ============

The key is a ``SecretStr``: its ``repr``/``str`` print ``**********``; :meth:`LLMSettings.safe_dict`
gives everything but the key, for logs and reports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/xeforge/llm`` (``~/.cache/xeforge/llm`` by default)."""
    import os

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "xeforge" / "llm"


class LLMSettings(BaseSettings):
    """Settings of the llm engine (see the module docstring for the variables).

    Units: ``timeout_s``, ``backoff_s``, ``backoff_max_s`` in seconds. ``max_retries`` counts
    retries after the first attempt (0 disables them). Raises ``pydantic.ValidationError`` for
    out-of-range values (negative timeout, temperature outside 0..2, ...).
    """

    model_config = SettingsConfigDict(env_prefix="XEFORGE_LLM_", env_file=".env", env_file_encoding="utf-8",
                                      extra="ignore", populate_by_name=True)

    base_url: str = Field(DEFAULT_BASE_URL,
                          validation_alias=AliasChoices("base_url", "XEFORGE_LLM_BASE_URL", "OPENAI_BASE_URL"))
    model: str = "gpt-4o"
    api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("api_key", "XEFORGE_LLM_API_KEY", "OPENAI_API_KEY"))
    temperature: float = Field(0.2, ge=0.0, le=2.0)
    max_tokens: int = Field(8192, gt=0)
    timeout_s: float = Field(180.0, gt=0)
    max_retries: int = Field(4, ge=0, le=20)
    backoff_s: float = Field(2.0, ge=0)
    backoff_max_s: float = Field(60.0, ge=0)
    cache_dir: Path | None = None
    use_cache: bool = True
    system_prompt: str | None = None

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        v = v.strip()
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https:// (got {v!r})")
        return v.rstrip("/")

    def has_key(self) -> bool:
        """Whether an API key is configured (a non-empty one)."""
        return self.api_key is not None and bool(self.api_key.get_secret_value())

    def key_value(self) -> str:
        """The API key in clear, only for the HTTP client (never log or store it). Local
        endpoints that need no key get a placeholder the openai SDK accepts."""
        return self.api_key.get_secret_value() if self.has_key() else "no-key"  # type: ignore[union-attr]

    def resolved_cache_dir(self) -> Path:
        return Path(self.cache_dir) if self.cache_dir else default_cache_dir()

    def safe_dict(self) -> dict[str, Any]:
        """Every setting but the key (``api_key_set`` says whether one is configured)."""
        data = self.model_dump(exclude={"api_key"})
        data["cache_dir"] = str(self.resolved_cache_dir())
        data["api_key_set"] = self.has_key()
        return data


def load_llm_settings(**overrides: Any) -> LLMSettings:
    """Settings from the environment and ``.env``, with ``overrides`` (``None`` values ignored)
    applied on top. Raises ``pydantic.ValidationError`` for invalid values."""
    return LLMSettings(**{k: v for k, v in overrides.items() if v is not None})
