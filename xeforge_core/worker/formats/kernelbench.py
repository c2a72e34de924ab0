"""KernelBench's formats (ScalingIntelligence/KernelBench): a problem file is a plain-PyTorch
``class Model(nn.Module)`` with ``get_inputs()`` / ``get_init_inputs()``; a solution file
defines ``class ModelNew``, and keeps the problem's ``Model`` beside it when it has one (then
that ``Model`` is the truth)."""

from __future__ import annotations

from xeforge_core.worker.formats.base import ProblemFormat

KERNELBENCH_SOLUTION = ProblemFormat(
    name="kernelbench_solution", title="KernelBench solution (class ModelNew, its Model the reference)",
    entry_names=("ModelNew",), reference_class="Model",
    inputs_function="get_inputs", init_inputs_function="get_init_inputs")

KERNELBENCH_PROBLEM = ProblemFormat(
    name="kernelbench_problem", title="KernelBench problem or plain module (class Model with get_inputs())",
    entry_names=("Model",), inputs_function="get_inputs", init_inputs_function="get_init_inputs")
