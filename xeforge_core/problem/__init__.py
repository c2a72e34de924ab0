"""Kernel problems: the kernel module, its optional PyTorch reference and its Xe-Forge spec.

Everything here reads files statically (``yaml``, ``ast``, standard library): no model or kernel
code runs in this process, and torch is not imported (dtype names are checked against a table).

Main entry points::

    load_problem(kernel_path, spec_path=None, reference_path=None) -> Problem
    problem_from_source(source, *, name="kernel", spec_text=None, reference_source=None,
                        spec_path=None) -> Problem
    parse_spec(text, path=None) -> Spec
    evaluate_flop(formula, dims) -> float
    read_module(source, path=None) -> ModuleFacts
    odd_size_variant(problem_or_spec, variant) -> Variant | None
"""

from .dtypes import dtype_size, normalize_dtype
from .flops import evaluate_flop
from .loader import (
    check_candidate_entry,
    find_reference,
    find_spec,
    load_problem,
    problem_from_source,
    read_candidate,
)
from .model import InitSpec, InputSpec, ModuleFile, Problem, ProblemError, Spec, Variant
from .module import (
    ClassInfo,
    DtypeConstraint,
    KernelInfo,
    KernelLaunch,
    ModuleFacts,
    Signature,
    read_module,
)
from .spec import odd_size_variant, parse_spec

__all__ = [
    "read_candidate",
    "check_candidate_entry",
    "load_problem",
    "problem_from_source",
    "parse_spec",
    "evaluate_flop",
    "odd_size_variant",
    "read_module",
    "find_spec",
    "find_reference",
    "normalize_dtype",
    "dtype_size",
    "Problem",
    "Spec",
    "Variant",
    "InputSpec",
    "InitSpec",
    "ModuleFile",
    "ProblemError",
    "ModuleFacts",
    "ClassInfo",
    "Signature",
    "KernelInfo",
    "KernelLaunch",
    "DtypeConstraint",
]
