"""The verdict cache: diskcache keyed by everything that can change a verdict.

Location: ``$XEFORGE_CACHE_DIR`` if set, else ``~/.cache/xeforge`` (``cache_root()``), with
``verdicts/`` (diskcache), ``baselines/`` (saved baseline outputs, see ``xeforge_core.verify``)
and ``devices/`` (device probe results).

A verdict key (``verdict_key``) is a sha256 over: the baseline, candidate and reference source
text; the spec data and the variants (correctness and performance, as the worker receives
them); the verification options that change results; the device fingerprint key; the
torch/triton/numpy versions installed; the worker code version (a hash of
``xeforge_core/worker/*.py`` and ``xeforge_core/verdict.py``) and the verifier's (every module of
the package and the knowledge base's rules, hardware profiles and search spaces: the sizes
derived, the contract, the policies), so a change to the harness or to how a verdict is decided
invalidates old verdicts. A hit comes back with ``Verdict.cached = True``.

Secrets never enter a key or a value: verdicts hold only code, numbers and the worker's
captured output, and the worker runs without secrets in its environment.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from xeforge_core.verdict import Verdict

PACKAGE_DIR = Path(__file__).resolve().parent

#: Size limit of the verdict cache (bytes); diskcache evicts least-recently-stored entries.
VERDICT_CACHE_BYTES = 512 * 2**20


def cache_root() -> Path:
    """The cache directory: ``$XEFORGE_CACHE_DIR`` or ``~/.cache/xeforge`` (created). Where
    that cannot be created (a read-only home), a per-user directory under the system temp dir."""
    env = os.environ.get("XEFORGE_CACHE_DIR")
    root = Path(env).expanduser() if env else Path.home() / ".cache" / "xeforge"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        uid = os.getuid() if hasattr(os, "getuid") else "user"
        root = Path(tempfile.gettempdir()) / f"xeforge-cache-{uid}"
        root.mkdir(parents=True, exist_ok=True)
    return root


def stable_hash(*parts: Any) -> str:
    """Hex sha256 of the canonical JSON of ``parts`` (sorted keys; non-JSON values as str)."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@functools.lru_cache(maxsize=1)
def library_versions() -> dict[str, str | None]:
    """Installed versions of the libraries the worker runs on, read from package metadata
    (no import): torch, triton (or Intel's pytorch-triton-xpu), numpy."""
    out: dict[str, str | None] = {}
    for name, alternatives in (("torch", ("torch",)),
                               ("triton", ("triton", "pytorch-triton-xpu", "pytorch-triton")),
                               ("numpy", ("numpy",))):
        out[name] = None
        for dist in alternatives:
            try:
                out[name] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return out


def worker_code_version() -> str:
    """sha256 (first 16 hex digits) of the worker's code: ``xeforge_core/worker/*.py`` and
    ``xeforge_core/verdict.py``, in name order."""
    files = sorted((PACKAGE_DIR / "worker").glob("*.py")) + [PACKAGE_DIR / "verdict.py"]
    return _files_digest(files, lambda path: path.name)


@functools.lru_cache(maxsize=1)
def verifier_code_version() -> str:
    """sha256 (first 16 hex digits) of the code a verdict depends on beyond the worker's: every
    module of the package (the sizes the parent derives, the published-shape contract, the
    precision policy, the lints) and the knowledge base's rules, hardware profiles (the grid
    limits the interpreter enforces) and search spaces beside it, in path order. Any change to
    them invalidates cached verdicts; read once per process."""
    knowledge = [PACKAGE_DIR.parent / "knowledge" / part for part in ("rules", "hardware", "search_spaces")]
    files = sorted(PACKAGE_DIR.rglob("*.py")) + sorted(p for d in knowledge if d.is_dir()
                                                       for p in d.rglob("*") if p.is_file())
    return _files_digest(files, lambda path: str(path.relative_to(PACKAGE_DIR.parent)))


def _files_digest(files: list[Path], label: Callable[[Path], str]) -> str:
    """sha256 (first 16 hex digits) over each file's ``label`` and bytes, in the order given (a
    file that cannot be read counts as ``<missing>``)."""
    h = hashlib.sha256()
    for path in files:
        h.update(label(path).encode())
        try:
            h.update(path.read_bytes())
        except OSError:
            h.update(b"<missing>")
    return h.hexdigest()[:16]


def verdict_key(*, baseline_source: str, candidate_source: str, reference_source: str | None,
                spec: dict[str, Any] | None, correctness_variants: list[dict[str, Any]],
                performance_variants: list[dict[str, Any]], options: dict[str, Any],
                device_key: str) -> str:
    """The cache key of one verification (hex sha256); see the module docstring."""
    return stable_hash({
        "what": "verdict",
        "baseline": hashlib.sha256(baseline_source.encode()).hexdigest(),
        "candidate": hashlib.sha256(candidate_source.encode()).hexdigest(),
        "reference": hashlib.sha256(reference_source.encode()).hexdigest() if reference_source else None,
        "spec": spec,
        "correctness_variants": correctness_variants,
        "performance_variants": performance_variants,
        "options": options,
        "device": device_key,
        "versions": library_versions(),
        "worker": worker_code_version(),
        "verifier": verifier_code_version(),
    })


class VerdictCache:
    """Verdicts stored as JSON dicts in a diskcache under ``cache_root()/verdicts``.

    ``get(key)`` returns a ``Verdict`` with ``cached=True`` or ``None``; ``set(key, verdict)``
    stores it (never raising: a full disk or a locked cache only loses the entry).
    """

    def __init__(self, directory: str | Path | None = None) -> None:
        import diskcache

        self.directory = Path(directory) if directory else cache_root() / "verdicts"
        self._cache = diskcache.Cache(str(self.directory), size_limit=VERDICT_CACHE_BYTES)

    def get(self, key: str) -> Verdict | None:
        """The cached verdict for ``key`` (``cached=True``), or ``None`` on a miss, a corrupt
        entry or one from an older verdict schema."""
        try:
            data = self._cache.get(key)
        except Exception:  # noqa: BLE001 - a corrupt or locked cache is a miss
            return None
        if not isinstance(data, dict):
            return None
        try:
            verdict = Verdict.from_dict(data)
        except Exception:  # noqa: BLE001 - an entry from an older schema is a miss
            return None
        verdict.cached = True
        return verdict

    def set(self, key: str, verdict: Verdict) -> None:
        """Store ``verdict`` under ``key`` (stored with ``cached=False``; errors are ignored)."""
        data = verdict.to_dict()
        data["cached"] = False
        with contextlib.suppress(Exception):
            self._cache.set(key, data)

    def delete(self, key: str) -> None:
        """Forget the entry for ``key`` (no error if absent)."""
        with contextlib.suppress(Exception):
            self._cache.delete(key)

    def clear(self) -> None:
        """Remove every cached verdict."""
        self._cache.clear()

    def __len__(self) -> int:
        return len(self._cache)

    def close(self) -> None:
        """Close the underlying diskcache (its SQLite connection)."""
        self._cache.close()
