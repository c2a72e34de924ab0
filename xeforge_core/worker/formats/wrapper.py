"""The wrapper-function format: a kernel module whose entry is a module-level
``triton_kernel_wrapper(...)``, as in the PyTorch-to-Triton training sets built from KernelBook
(e.g. Prathmesh234/MultiTurnKernel-SFT, whose evaluator calls it with the ``get_inputs()``
tensors and, where it asks for more, the reference module's weights and biases in module order).
KernelAgent's modules use the same name behind ``kernel_function = triton_kernel_wrapper``.

It is entered exactly as KernelAgent's ``kernel_function`` is (``formats.kernelagent``: inputs
by name or position, then the reference model's attributes and parameters, defaults kept), so
the verdict says how it was called."""

from __future__ import annotations

from xeforge_core.worker.formats.base import ProblemFormat
from xeforge_core.worker.formats.kernelagent import adapt

WRAPPER = ProblemFormat(
    name="wrapper", title="triton_kernel_wrapper(...) bound to the problem's model (KernelBook-derived sets)",
    entry_kind="function", entry_names=("triton_kernel_wrapper",), reference_class="Model",
    inputs_function="get_inputs", init_inputs_function="get_init_inputs", adapt=adapt)
