"""Outputs the baseline job saves for the candidate job, streamed so that host memory stays
independent of tensor size.

Each run (``KEY = <variant>__s<seed>__<distribution>``) is saved as ``<KEY>.json`` (an index:
per output either a tensor record or a plain value) plus one raw file per tensor,
``<KEY>.o<i>.bin`` for the module's outputs, ``<KEY>.r<i>.bin`` for the reference's, and, where
the truth was also computed in float64 (``worker/truth64.py``), ``<KEY>.d<i>.bin`` (its
deviation from the truth's output), ``<KEY>.s<i>.bin`` (its sensitivity) and ``<KEY>.g<i>.bin``
(its drift under a shrink of every input). A tensor
is copied from the device to the host and written ``CHUNK_BYTES`` at a time; reading gives a
:class:`StoredTensor` that yields device chunks of the same size, so a 6.4 GB output passes
through host memory 64 MiB at a time. Each tensor's SHA-256 is computed as it is written: equal
hashes mean bitwise-equal outputs (the constant-output check) without reading anything back.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

#: Bytes moved between device and host per chunk when saving or reading expected outputs.
CHUNK_BYTES = 64 << 20

#: The parts of a saved run, with the letter their files carry (``<KEY>.<letter><i>.bin``); the
#: float64 truth's parts may hold ``None`` for an output the check does not cover.
PARTS = {"outputs": "o", "reference": "r", "deviation": "d", "sensitivity": "s", "drift": "g"}
_TRUTH64_PARTS = ("deviation", "sensitivity", "drift")

#: Tensors up to this size are read back whole when a caller needs the tensor itself.
SMALL_BYTES = 256 << 20

_DTYPES = {str(t).replace("torch.", ""): t for t in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
    torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool)}
for _name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "uint16", "uint32", "uint64"):
    if hasattr(torch, _name):
        _DTYPES[_name] = getattr(torch, _name)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


@dataclass(frozen=True)
class StoredTensor:
    """A tensor saved on disk by :class:`ExpectedStore`: ``shape``, ``dtype``, its file and
    its SHA-256. ``chunks`` yields flat device slices; ``load`` reads it whole (small tensors)."""

    path: Path
    shape: tuple[int, ...]
    dtype: torch.dtype
    sha256: str

    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= int(d)
        return n

    @property
    def nbytes(self) -> int:
        return self.numel() * torch.empty((), dtype=self.dtype).element_size()

    def chunks(self, elements: int, device: torch.device | str = "cpu") -> Iterator[torch.Tensor]:
        """Consecutive flat slices of at most ``elements`` elements, on ``device``."""
        itemsize = torch.empty((), dtype=self.dtype).element_size()
        remaining = self.numel()
        with open(self.path, "rb") as fh:
            while remaining > 0:
                n = min(elements, remaining)
                buf = bytearray(n * itemsize)
                view = memoryview(buf)
                got = 0
                while got < len(buf):
                    k = fh.readinto(view[got:])
                    if not k:
                        raise OSError(f"{self.path.name} is shorter than its index says")
                    got += k
                flat = torch.frombuffer(buf, dtype=torch.uint8).view(self.dtype)
                yield flat.to(device)
                remaining -= n

    def load(self, device: torch.device | str = "cpu") -> torch.Tensor:
        """The whole tensor on ``device``."""
        parts = list(self.chunks(max(1, self.numel()), device))
        flat = parts[0] if parts else torch.empty(0, dtype=self.dtype, device=device)
        return flat.reshape(self.shape)


def flat_chunks(value: torch.Tensor | StoredTensor, elements: int, device: torch.device | str) -> Iterator[torch.Tensor]:
    """Consecutive flat slices of at most ``elements`` elements of a tensor (wherever it
    lives) or a :class:`StoredTensor`, each moved to ``device``."""
    if isinstance(value, StoredTensor):
        yield from value.chunks(elements, device)
        return
    flat = value.detach().reshape(-1)
    for start in range(0, flat.numel(), elements):
        yield flat[start:start + elements].to(device)


#: Disk left free beside saved outputs (bytes): the job's own scratch files and the other
#: jobs sharing the file system need room too.
DISK_RESERVE_BYTES = 2 << 30


def tensor_bytes(values: list[Any] | None) -> int:
    """Bytes the tensors among ``values`` take when saved (``None`` and plain values: 0)."""
    return sum(v.numel() * v.element_size() for v in values or [] if isinstance(v, torch.Tensor))


def disk_room(root: Path) -> int:
    """Bytes that may still be saved under ``root`` (its file system's free space less
    :data:`DISK_RESERVE_BYTES`; 0 when that cannot be read)."""
    try:
        return max(0, shutil.disk_usage(root).free - DISK_RESERVE_BYTES)
    except OSError:
        return 0


def _write_tensor(t: torch.Tensor, path: Path) -> str:
    """Write ``t`` raw (C order) to ``path`` in chunks; returns its SHA-256."""
    flat = t.detach().contiguous().reshape(-1)
    digest = hashlib.sha256()
    if flat.numel() == 0:
        path.write_bytes(b"")
        return digest.hexdigest()
    step = max(1, CHUNK_BYTES // flat.element_size())
    with open(path, "wb") as fh:
        for start in range(0, flat.numel(), step):
            part = flat[start:start + step].to("cpu")
            raw = part.view(torch.uint8).numpy().tobytes() if part.dtype != torch.bool else \
                part.to(torch.uint8).numpy().tobytes()
            digest.update(raw)
            fh.write(raw)
    return digest.hexdigest()


def tensor_digest(t: torch.Tensor) -> str:
    """SHA-256 of a tensor's bytes, computed chunk by chunk (as :func:`_write_tensor` does)."""
    flat = t.detach().contiguous().reshape(-1)
    digest = hashlib.sha256()
    step = max(1, CHUNK_BYTES // max(1, flat.element_size()))
    for start in range(0, flat.numel(), step):
        part = flat[start:start + step].to("cpu")
        digest.update(part.view(torch.uint8).numpy().tobytes() if part.dtype != torch.bool
                      else part.to(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _plain(value: Any) -> Any:
    return value if isinstance(value, (bool, int, float, str, type(None))) else repr(value)


class ExpectedStore:
    """The saved outputs of one baseline job, under ``root`` (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def save(self, key: str, outputs: list[Any], reference: list[Any] | None = None, *,
             deviation: list[Any] | None = None, sensitivity: list[Any] | None = None,
             drift: list[Any] | None = None) -> dict[str, list[str | None]]:
        """Save one run's outputs (and the reference's, and the float64 truth's ``deviation``,
        ``sensitivity`` and ``drift`` aligned with the truth's outputs, ``None`` entries where
        there is none). Returns the SHA-256 of each tensor output (``None`` for plain values) as
        ``{"outputs": [...], "reference": [...], ...}``."""
        self.root.mkdir(parents=True, exist_ok=True)
        index: dict[str, Any] = {}
        hashes: dict[str, list[str | None]] = {}
        given = {"outputs": outputs, "reference": reference, "deviation": deviation, "sensitivity": sensitivity,
                 "drift": drift}
        for part, values in given.items():
            if values is None:
                index[part] = None
                continue
            records = []
            digests: list[str | None] = []
            for i, value in enumerate(values):
                if value is None and part in _TRUTH64_PARTS:
                    records.append(None)
                    digests.append(None)
                elif isinstance(value, torch.Tensor):
                    name = f"{key}.{PARTS[part]}{i}.bin"
                    sha = _write_tensor(value, self.root / name)
                    records.append({"file": name, "shape": list(value.shape), "dtype": _dtype_name(value.dtype),
                                    "sha256": sha})
                    digests.append(sha)
                else:
                    records.append({"value": _plain(value)})
                    digests.append(None)
            index[part] = records
            hashes[part] = digests
        (self.root / f"{key}.json").write_text(json.dumps(index), encoding="utf-8")
        return hashes

    def has(self, key: str) -> bool:
        return (self.root / f"{key}.json").is_file()

    def load(self, key: str) -> dict[str, list[Any] | None]:
        """``{"outputs": [StoredTensor | value, ...], "reference": [...] | None, "deviation": ...,
        "sensitivity": ..., "drift": ...}`` of one run (``None`` for a part not saved, as the drift
        of runs saved before it was measured). Raises ``OSError`` / ``ValueError`` when the index
        is missing or unreadable."""
        index = json.loads((self.root / f"{key}.json").read_text(encoding="utf-8"))
        out: dict[str, list[Any] | None] = {}
        for part in PARTS:
            records = index.get(part)
            if records is None:
                out[part] = None
                continue
            items: list[Any] = []
            for rec in records:
                if rec is None:
                    items.append(None)
                elif "file" in rec:
                    items.append(StoredTensor(self.root / rec["file"], tuple(rec["shape"]),
                                              _DTYPES[rec["dtype"]], rec.get("sha256", "")))
                else:
                    items.append(rec.get("value"))
            out[part] = items
        return out


#: Tensors larger than this are fingerprinted on the device (sums and end slices) instead of by
#: hashing every byte on the host.
FINGERPRINT_HASH_BYTES = 64 << 20


def tensor_fingerprint(t: torch.Tensor) -> str:
    """A digest that changes when ``t``'s values do: :func:`tensor_digest` of its bytes up to
    :data:`FINGERPRINT_HASH_BYTES`; past that, its float64 sum and sum of squares and the digest
    of its first and last 4096 elements, computed on the device (a change that keeps both sums
    and both ends goes unseen)."""
    if t.numel() * t.element_size() <= FINGERPRINT_HASH_BYTES:
        return tensor_digest(t)
    flat = t.detach().reshape(-1)
    total = squares = 0.0
    for start in range(0, flat.numel(), 1 << 24):
        part = flat[start:start + (1 << 24)]
        wide = part.abs().double() if part.is_complex() else part.double()
        total += float(wide.sum())
        squares += float((wide * wide).sum())
    return repr((total, squares)) + tensor_digest(torch.cat([flat[:4096], flat[-4096:]]))


def materialize(values: list[Any], device: torch.device | str = "cpu") -> list[Any]:
    """``values`` with every :class:`StoredTensor` read whole onto ``device`` (for the small
    tensors of the integrity checks)."""
    return [v.load(device) if isinstance(v, StoredTensor) else v for v in values]
