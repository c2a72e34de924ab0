"""Torch dtype names, checked against a table so that the calling process never imports torch.

The table lists the dtypes of ``torch`` 2.x (``torch.float16`` ... ``torch.float8_e5m2fnuz``),
their attribute aliases (``half``, ``float``, ``double``, ``int``, ``long``, ``short``,
``cfloat``, ``cdouble``, ``chalf``) and the short forms kernel authors write (``fp16``,
``bf16``, ``fp32``, ``fp64``, ``fp8``...). Element sizes in bytes are those of
``torch.empty((), dtype=d).element_size()``.
"""

from __future__ import annotations

__all__ = ["DTYPE_SIZES", "normalize_dtype", "dtype_size", "KNOWN_DTYPE_NAMES"]

#: Canonical torch dtype name -> element size in bytes.
DTYPE_SIZES: dict[str, int] = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1,
    "complex128": 16, "complex64": 8, "complex32": 4,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1,
    "uint64": 8, "uint32": 4, "uint16": 2, "uint8": 1,
    "bool": 1,
}

#: Alias (lower case) -> canonical torch name. torch attribute aliases first, then short forms.
_ALIASES: dict[str, str] = {
    "half": "float16", "float": "float32", "double": "float64",
    "cfloat": "complex64", "cdouble": "complex128", "chalf": "complex32",
    "int": "int32", "long": "int64", "short": "int16",
    "fp16": "float16", "f16": "float16", "bf16": "bfloat16", "fp32": "float32", "f32": "float32",
    "fp64": "float64", "f64": "float64", "fp8": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8",
}

KNOWN_DTYPE_NAMES: tuple[str, ...] = tuple(DTYPE_SIZES) + tuple(_ALIASES)


def normalize_dtype(name: object) -> str | None:
    """The canonical torch dtype name for ``name`` (``"half"``/``"fp16"``/``"torch.float16"``
    -> ``"float16"``), or ``None`` when it is not a torch dtype. Case-insensitive; a ``torch.``
    or ``tl.`` prefix is accepted."""
    if not isinstance(name, str):
        return None
    text = name.strip()
    for prefix in ("torch.", "tl.", "triton.language."):
        if text.startswith(prefix):
            text = text[len(prefix):]
            break
    key = text.lower()
    if key in DTYPE_SIZES:
        return key
    return _ALIASES.get(key)


def dtype_size(name: str) -> int:
    """Element size in bytes of a canonical (or aliased) torch dtype name.

    Raises ``KeyError`` for an unknown name."""
    canonical = normalize_dtype(name)
    if canonical is None:
        raise KeyError(name)
    return DTYPE_SIZES[canonical]
