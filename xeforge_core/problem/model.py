"""The kernel problem: the code under test, its optional PyTorch reference, and its spec.

Everything here is parsed *statically* (YAML, AST): no kernel or model code is executed in
the calling process. Running ``get_inputs()`` / ``Model(...)`` happens only in the isolated
worker (``xeforge_core.worker``), which receives ``Problem.job_spec()`` and
``Variant.to_data()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xeforge_core.errors import XeForgeError, nearest_name_hint

from .entry import entry_point, kernels_reached, mentions_triton_jit


class ProblemError(XeForgeError, ValueError):
    """Bad input: a kernel file, reference or spec that cannot be used as given.

    ``file`` is the offending file, ``line`` its 1-based line when known, ``field`` the YAML
    field path (e.g. ``ci[0].dims.BATCH``) when the error is in a spec. ``str(err)`` names all
    of them, so a UI or CLI can show it as is.
    """


def is_ci_variant(name: str) -> bool:
    """Whether a spec variant is one of its ``ci`` entries (``ci``, ``ci[1]``, ...): the small
    shapes correctness is checked at."""
    return name == "ci" or name.startswith("ci[")


@dataclass(frozen=True)
class InputSpec:
    """One forward() input: symbolic ``shape`` (dim names or ints) and torch dtype name."""

    name: str
    shape: tuple[str | int, ...]
    dtype: str = "float32"


@dataclass(frozen=True)
class InitSpec:
    """One positional ``Model.__init__`` argument: ``value`` is a dim name or a literal."""

    key: str
    value: Any


@dataclass
class Variant:
    """One shape variant: an entry of a spec's variant list (``ci``, ``ci[1]``, ``bench-gpu``),
    or, without a spec, ``module`` / ``module-small`` / a derived copy.

    ``dims`` maps dim names to ints, floats, lists or strings (YAML 1.1 leaves ``1e-5`` a
    string; it is kept as given); ``flop`` is the evaluated floating-point operation count of
    one forward call (``None`` if the spec gives none); ``bytes`` is the sum of the *input*
    tensors' sizes in bytes (shape x dtype element size). Outputs are not included: their
    shapes and dtypes are unknown until the module runs, so ``bytes`` is a lower bound of the
    bytes moved. ``init_values`` are the resolved positional ``Model.__init__`` arguments;
    ``shapes`` and ``input_dtypes`` are each ``params`` input's concrete shape and torch dtype
    name (the variant ``dtype`` overrides every floating-point input's own).
    """

    name: str
    params: list[str]
    dims: dict[str, Any]
    dtype: str | None = None
    flop_formula: str | float | None = None
    flop: float | None = None
    bytes: float | None = None
    rtol: float | None = None
    atol: float | None = None
    init_values: list[Any] = field(default_factory=list)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    input_dtypes: dict[str, str] = field(default_factory=dict)
    #: module-level size constants of the inputs module set before ``get_inputs()`` /
    #: ``get_init_inputs()`` run (KernelBench problems without a spec), e.g. ``{"batch_size": 16}``
    overrides: dict[str, int] = field(default_factory=dict)
    #: why this variant exists when the verifier derived it (reduced size, grid coverage)
    derived: str = ""

    def to_data(self) -> dict[str, Any]:
        """The JSON-able ``VariantData`` the worker receives (see ``worker/job.py``)."""
        return {
            "overrides": dict(self.overrides),
            "name": self.name,
            "params": list(self.params),
            "dims": dict(self.dims),
            "dtype": self.dtype,
            "flop": self.flop,
            "bytes": self.bytes,
            "rtol": self.rtol,
            "atol": self.atol,
            "init_values": list(self.init_values),
            "shapes": {n: list(s) for n, s in self.shapes.items()},
            "input_dtypes": dict(self.input_dtypes),
        }


@dataclass
class Spec:
    """An Xe-Forge YAML spec: inputs, inits and variant families (by name, file order).

    ``warnings`` lists what the parser ignored or found odd (extra entries of a variant list,
    unknown keys, duplicate keys), each naming the file, line and field; ``lines`` maps field
    paths (``ci[0].dims.B``) to their 1-based line in the YAML text. ``allow`` names the
    precision downgrades the problem accepts beyond its own dtype (``xeforge_core.precision``).
    """

    path: Path | None
    inputs: dict[str, InputSpec]
    inits: list[InitSpec]
    variants: dict[str, Variant]
    default_variant: str | None = None
    warnings: list[str] = field(default_factory=list)
    allow: tuple[str, ...] = ()
    lines: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def line_of(self, field_path: str) -> int | None:
        """1-based line of a field (``inits``, ``ci[0].params``) in the spec text, if known."""
        return self.lines.get(field_path)

    def to_data(self) -> dict[str, Any]:
        """The JSON-able ``SpecData`` the worker receives (see ``worker/job.py``)."""
        return {
            "inputs": {n: {"shape": list(i.shape), "dtype": i.dtype} for n, i in self.inputs.items()},
            "inits": [{"key": i.key, "value": i.value} for i in self.inits],
        }


@dataclass
class ModuleFile:
    """A Python module given as source text (and its path, when it came from a file).

    ``class_name`` is the class the harness instantiates: ``Model`` for a KernelBench-style
    module, ``ModelNew`` for KernelBench's solution convention (or, with ``entry ==
    "function"``, the function it calls).
    """

    source: str
    path: Path | None = None
    class_name: str = "Model"
    label: str = "baseline"
    #: ``class`` (instantiate ``class_name``) or ``function`` (KernelAgent's convention: call the
    #: module-level function ``class_name``, e.g. ``kernel_function``, with the inputs and the
    #: reference model's parameters)
    entry: str = "class"

    def to_data(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "filename": self.path.name if self.path else f"{self.label}.py",
            "class_name": self.class_name,
            "label": self.label,
            "entry": self.entry,
        }


@dataclass
class Problem:
    """A kernel problem: the baseline module, the truth, the inputs and the spec.

    ``name`` is a short identifier (the file stem). Roles:

    * ``kernel``: the baseline the candidate's speedup is measured against. A Triton module,
      or, when ``eager_baseline`` is true, the problem's plain-PyTorch ``Model`` itself (a
      KernelBench or KernelAgent problem file): speedups are then "vs eager".
    * ``reference``: the PyTorch reference, when one exists (the same module as ``kernel``
      for an eager baseline). It is the truth: a candidate that disagrees with it is wrong,
      whatever the baseline does.
    * ``inputs``: the module whose ``get_inputs()`` / ``get_init_inputs()`` build the inputs
      when there is no spec (the problem file in KernelBench's convention, where solutions
      define only ``ModelNew``); ``None`` with a spec, or when no file defines them.
    * ``spec``: the Xe-Forge YAML spec, if any. Without one, the variants are ``module`` (the
      published sizes) and, when those are large, ``module-small`` (the same problem with its
      size constants reduced; see ``problem.scaling``), checked by default.
    """

    name: str
    kernel: ModuleFile
    reference: ModuleFile | None = None
    spec: Spec | None = None
    warnings: list[str] = field(default_factory=list)
    inputs: ModuleFile | None = None
    eager_baseline: bool = False
    module_variants: dict[str, Variant] = field(default_factory=dict)

    def _module_variant(self, name: str) -> Variant | None:
        if name == "module":
            return Variant(name="module", params=[], dims={})
        return self.module_variants.get(name)

    def variant(self, name: str) -> Variant:
        """Return the named variant. Raises ``ProblemError`` naming the spec and the
        available variants when it does not exist."""
        if self.spec is None:
            found = self._module_variant(name)
            if found is not None:
                return found
            names = ["module", *self.module_variants]
            raise ProblemError(f"no spec given, so there is no variant {name!r}; known: {', '.join(names)}"
                               + nearest_name_hint(name, names))
        if name not in self.spec.variants and name in self.module_variants:
            return self.module_variants[name]  # a reduced copy the verifier derived
        if name not in self.spec.variants:
            known = ", ".join(sorted(self.spec.variants)) or "none"
            raise ProblemError(f"unknown variant {name!r} (known: {known})"
                               + nearest_name_hint(name, list(self.spec.variants)), file=self.spec.path)
        return self.spec.variants[name]

    def correctness_variants(self) -> list[Variant]:
        """Variants small enough to check for correctness on any device: every entry of the
        spec's ``ci`` list (``ci``, ``ci[1]``, ...), else a reduced copy of the default variant
        (``<default>-small``, when it is large), else the default variant; without a spec,
        ``module-small`` when the published sizes were reduced, else ``module``."""
        if self.spec is None:
            return [self.module_variants.get("module-small") or Variant(name="module", params=[], dims={})]
        ci = [v for n, v in self.spec.variants.items() if is_ci_variant(n)]
        if ci:
            return ci
        default = self.default_variant_name()
        return [self.module_variants.get(f"{default}-small") or self.variant(default)]

    def benchmark_variants(self, device_type: str) -> list[Variant]:
        """Variants to time on ``device_type``: ``bench-xpu`` on xpu when present, else
        the default variant (``default_variant`` > ``bench-gpu``); ``module`` (the published
        sizes) without a spec."""
        if self.spec is None:
            return [Variant(name="module", params=[], dims={})]
        if device_type == "xpu" and "bench-xpu" in self.spec.variants:
            return [self.spec.variants["bench-xpu"]]
        return [self.variant(self.default_variant_name())]

    def default_variant_name(self) -> str:
        if self.spec is None:
            return "module"
        if self.spec.default_variant and self.spec.default_variant in self.spec.variants:
            return self.spec.default_variant
        if "bench-gpu" in self.spec.variants:
            return "bench-gpu"
        return next(iter(self.spec.variants), "module")

    @property
    def truth(self) -> str:
        """What candidates are judged against: ``reference`` when one exists, else
        ``baseline``."""
        return "reference" if self.reference is not None else "baseline"

    def with_kernel_source(self, source: str, label: str = "candidate") -> Problem:
        """The same problem with another version of the kernel module as its baseline. A
        version whose model class still reaches no ``@triton.jit`` kernel (the plain-PyTorch
        problem a session of a KernelBench problem starts from; see ``kernels_reached``) stays
        the eager baseline; a Triton version is a Triton baseline."""
        kind, name = entry_point(source, self.kernel.class_name)
        kernel = ModuleFile(source=source, path=self.kernel.path, class_name=name, label=label, entry=kind)
        reached = kernels_reached(source, name)
        launches = bool(reached) if reached is not None else mentions_triton_jit(source)
        eager = self.reference is not None and kind == "class" and not launches
        return Problem(name=self.name, kernel=kernel, reference=self.reference, spec=self.spec,
                       warnings=list(self.warnings), inputs=self.inputs, eager_baseline=eager,
                       module_variants=dict(self.module_variants))

    def job_spec(self) -> dict[str, Any]:
        """The problem part of a worker job (see ``worker/job.py``): ``module`` (the kernel),
        ``reference``, ``inputs`` and ``spec`` as JSON-able data (``None`` where absent), and
        whether the baseline is the reference itself."""
        return {
            "module": self.kernel.to_data(),
            "reference": self.reference.to_data() if self.reference else None,
            "inputs": self.inputs.to_data() if self.inputs else None,
            "spec": self.spec.to_data() if self.spec else None,
            "baseline_is_reference": self.eager_baseline,
        }
