"""Compile options of Triton's backends that the product checks data and code against.

Standard library only: the knowledge base's schema (hardware profiles, autotune configs) and the
lints of kernel code both read these.
"""

from __future__ import annotations

#: The GRF mode values Intel's Triton backend accepts as the ``grf_mode`` compile option
#: (``XPUOptions.grf_mode`` and ``make_spv`` in intel-xpu-backend-for-triton,
#: third_party/intel/backend/compiler.py). ``512`` exists only for newer architectures.
GRF_MODE_VALUES: tuple[str, ...] = ("default", "128", "256", "512", "auto")
#: Older spellings still seen in published kernels (``small``/``large``).
GRF_MODE_LEGACY: tuple[str, ...] = ("small", "large")
#: Keywords of ``triton.Config`` that ``Config.all_kwargs()`` lays over the config's
#: meta-parameter dict whatever they are, having defaults that are not ``None``
#: (``triton/runtime/autotuner.py``, Triton 3.6.0: 4 warps, 3 stages, 1 CTA): the same name written
#: in the dict is dropped. (``maxnreg`` defaults to ``None``, which ``all_kwargs()`` leaves out, so a
#: dict's ``maxnreg`` is used.) In ``Config``'s signature they follow the dict, in this order.
CONFIG_LAUNCH_OPTIONS: tuple[str, ...] = ("num_warps", "num_stages", "num_ctas")
