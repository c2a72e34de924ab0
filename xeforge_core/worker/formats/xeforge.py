"""Xe-Forge's case format: ``<stem>.py`` with ``class Model`` launching the Triton kernels, its
YAML spec ``<stem>.yaml`` (variants, inputs, inits, flop formula; ``problem/spec.py``) and,
when present, the PyTorch reference ``<stem>_pytorch.py`` / ``<stem>_ref.py``."""

from __future__ import annotations

from xeforge_core.worker.formats.base import ProblemFormat

XEFORGE = ProblemFormat(
    name="xeforge", title="Xe-Forge case (class Model, a sibling YAML spec and reference)",
    entry_names=("Model",), spec_suffixes=(".yaml", ".yml"), reference_suffixes=("_pytorch", "_ref"))
