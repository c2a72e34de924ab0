"""The IR worker: ``python -m xeforge_core.ir.worker JOB_DIR`` compiles a module's Triton
kernels ahead of time for one target, in its own process (started by
``xeforge_core.runner.run_worker``; kernel and model code never run in the UI or CLI process).

How the signature of each kernel is found: the module is imported (Triton's JIT, not its
interpreter), the model is built and ``forward()`` is called on CPU tensors of the job's
variant, and every kernel launch is intercepted. For each launch, Triton's own binder computes
the specialization the target's backend would use (argument types such as ``*fp16`` and
``i32``, ``tt.divisibility = 16`` for 16-aligned pointers and sizes, integers equal to 1 made
constants), exactly as ``JITFunction.run`` does before it compiles; then ``triton.compile``
builds that kernel for the target and the launch returns without running anything. No kernel
body executes anywhere; outputs of intercepted launches are left as allocated, so a forward
whose later launches depend on earlier outputs' *values* sees unwritten memory (their types
and shapes, which decide the specialization, are right).

An ``@triton.autotune`` kernel compiles the config the job names (``config_index``; default
the first, ``None`` for every config up to ``max_kernels``): without a device there is no
benchmark to pick one. Launch options the target's backend does not know (Intel's
``grf_mode`` on a cuda target) are dropped, and the result says so.

Job (``job.json``)::

    {"role": "ir", "device": "aot", "job_dir": str, "module": ModuleSource,
     "inputs": ModuleSource | null, "reference": ModuleSource | null,
     "spec": SpecData | null, "variant": VariantData | null,
     "target": {"id", "backend", "arch", "warp_size", "label", "stages"},
     "config_index": int | null, "max_kernels": 16}

Result (``result.json``)::

    {"role": "ir", "kind": "ok" | "unavailable" | "compile_error" | "runtime_error",
     "reason": str, "line": int | null, "error_text": str, "triton_version": str,
     "target": {...}, "variant": str | null, "launches": int, "notes": [str],
     "kernels": [{"name", "launch", "signature": {param: type}, "constexprs": {param: value},
                  "specialization": {param: str}, "options": {...}, "autotune": {...} | null,
                  "ir": {stage: text}, "truncated": [stage], "resources": {...},
                  "metadata": {...}, "compile_seconds": float, "error": str, "line": int | null}],
     "not_launched": [kernel names]}

Only torch, triton, the standard library and this package are imported (the same rule as the
verification worker: it runs on GPU machines with only the device's stack installed).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from xeforge_core.ir.stats import COMPILE_STDERR, compiler_diagnostics, resource_summary
from xeforge_core.verdict import VerdictKind
from xeforge_core.worker.backends import triton_backend_for
from xeforge_core.worker.errors import Failure, WorkerError, classify
from xeforge_core.worker.formats.base import forward_params
from xeforge_core.worker.job import PROGRESS_FILE, read_job, write_result
from xeforge_core.worker.loading import load_module

#: Largest IR text kept per stage (characters); longer texts are cut and listed in ``truncated``.
MAX_IR_CHARS = 2_000_000

#: Text stages kept (binary ``cubin``/``hsaco``/``spv`` bytes are not).
_SKIP_STAGES = ("source", "cubin", "hsaco")


class _Progress:
    def __init__(self, job_dir: Path) -> None:
        self.path = job_dir / PROGRESS_FILE

    def __call__(self, message: str) -> None:
        with contextlib.suppress(OSError), open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"t": time.time(), "event": "step", "message": message}) + "\n")


@contextlib.contextmanager
def _native_stderr(job_dir: Path | None) -> Any:
    """Copy what native code (MLIR's diagnostics) writes to file descriptor 2 meanwhile: yields an
    object whose ``getvalue()`` is that text once the block has ended; the text still reaches the
    process's stderr afterwards. It is written to ``job_dir / COMPILE_STDERR`` as it comes (a
    temporary file without a job folder), so a worker that dies inside the block leaves it there."""
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    captured = io.StringIO()
    sink = open(job_dir / COMPILE_STDERR, "w+b") if job_dir is not None else tempfile.TemporaryFile()  # noqa: SIM115
    with sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode("utf-8", "replace")
            captured.write(text)
            sys.stderr.write(text)
            if job_dir is not None:   # the block ended: a later death is not this compile's
                (job_dir / COMPILE_STDERR).unlink(missing_ok=True)


def _plain(value: Any) -> Any:
    """A JSON-able copy of a metadata value (scalars, lists and dicts of them), else its repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return repr(value)


def _param_name(names: list[str], path: tuple) -> str:
    """A parameter's name from a Triton argument path (``(3,)`` -> ``names[3]``; a path into a
    tuple argument -> ``name[1]``)."""
    if not path:
        return "?"
    base = names[path[0]] if path[0] < len(names) else f"arg{path[0]}"
    return base + "".join(f"[{i}]" for i in path[1:])


class _Compiler:
    """Holds the target, the backend and what was compiled; installs the launch hooks."""

    def __init__(self, job: dict[str, Any], say: _Progress) -> None:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import make_backend

        self.triton = triton
        self.job = job
        self.say = say
        t = job["target"]
        self.target_data = t
        self.notes: list[str] = []
        self.target = _xpu_target(t, self.notes) if t["backend"] == "xpu" else None
        if self.target is None:
            self.target = GPUTarget(t["backend"], t["arch"], int(t["warp_size"]))
        self.backend = make_backend(self.target)
        self.known_options = set(self.backend.parse_options({}).__dict__)
        self.config_index = job.get("config_index", 0)
        self.max_kernels = int(job.get("max_kernels") or 16)
        self.kernels: list[dict[str, Any]] = []
        self.seen: set[str] = set()
        self.launches = 0
        self.jit_functions: list[Any] = []
        self.path = ""
        self.job_dir: Path | None = None   # set once the job's folder is known (see _native_stderr)
        self._patched: list[tuple[Any, str, Any]] = []
        self._autotune_stack: list[dict[str, Any]] = []

    # ---------------------------------------------------------------- hooks
    def install(self) -> None:
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.jit import JITFunction

        compiler = self

        def jit_run(fn_self: Any, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> Any:
            compiler.launches += 1
            compiler.compile_launch(fn_self, args, kwargs)
            return None

        def autotune_run(tuner: Any, *args: Any, **kwargs: Any) -> Any:
            configs = list(tuner.configs)
            name = getattr(getattr(tuner, "base_fn", None), "__name__", None) or "kernel"
            if compiler.config_index is None:
                chosen = list(range(min(len(configs), compiler.max_kernels)))
            else:
                chosen = [min(max(int(compiler.config_index), 0), len(configs) - 1)]
            for i in chosen:
                config = configs[i]
                tuner.best_config = config
                info = {"kernel": name, "count": len(configs), "index": i, "config": str(config),
                        "kwargs": _plain(dict(config.kwargs)), "num_warps": config.num_warps,
                        "num_stages": config.num_stages}
                compiler._autotune_stack.append(info)
                try:
                    if config.pre_hook is not None:  # as Autotuner.run does: it may set what the
                        # launch specializes on (a tensor descriptor's block shape, say)
                        config.pre_hook({**dict(zip(tuner.arg_names, args)), **kwargs, **config.all_kwargs()})
                    tuner.fn.run(*args, **kwargs, **config.all_kwargs())
                finally:
                    compiler._autotune_stack.pop()
            return None

        for cls, attr, new in ((JITFunction, "run", jit_run), (Autotuner, "run", autotune_run)):
            self._patched.append((cls, attr, getattr(cls, attr)))
            setattr(cls, attr, new)

    def uninstall(self) -> None:
        for cls, attr, original in self._patched:
            setattr(cls, attr, original)
        self._patched = []

    # ---------------------------------------------------------------- one launch
    def compile_launch(self, fn: Any, args: tuple, kwargs: dict[str, Any]) -> None:
        from triton import knobs
        from triton.compiler import ASTSource
        from triton.runtime.jit import create_function_from_signature

        name = getattr(getattr(fn, "fn", None), "__name__", None) or "kernel"
        names = [p.name for p in fn.params]
        kwargs = dict(kwargs)
        dropped = sorted(k for k in kwargs if k not in names and k not in self.known_options)
        for k in dropped:
            kwargs.pop(k)
        kwargs["debug"] = kwargs.get("debug", fn.debug) or knobs.runtime.debug
        kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
        binder = create_function_from_signature(fn.signature, fn.params, self.backend)
        bound, specialization, options = binder(*args, **kwargs)
        key = f"{name}|{specialization}|{sorted(options.items()) if isinstance(options, dict) else options}"
        autotune = dict(self._autotune_stack[-1]) if self._autotune_stack else None
        if key in self.seen:
            return
        self.seen.add(key)
        entry: dict[str, Any] = {"name": name, "launch": self.launches, "autotune": autotune,
                                 "dropped_options": dropped, "ir": {}, "truncated": [], "error": "",
                                 "line": None, "resources": {}, "metadata": {}}
        if dropped:
            self.notes.append(f"{name}: launch option(s) {', '.join(dropped)} dropped: not options of the "
                              f"{self.target_data['backend']} backend")
        if len(self.kernels) >= self.max_kernels:
            if len(self.kernels) == self.max_kernels:
                self.notes.append(f"more than {self.max_kernels} distinct kernel compilations: the rest were "
                                  "not compiled")
            return
        self.kernels.append(entry)
        self.say(f"compiling {name} for {self.target_data['label']}")
        started = time.perf_counter()
        native = None   # what the compiler wrote to stderr, once the compile itself has started
        try:
            opts, signature, constexprs, attrs = fn._pack_args(self.backend, kwargs, bound, specialization,
                                                               options)
            params = {p.name: p for p in fn.params}
            entry["signature"] = {k: str(v) for k, v in signature.items()}
            entry["constexprs"] = {_param_name(names, p): _plain(v) for p, v in constexprs.items()}
            spec: dict[str, str] = {}
            for p, v in constexprs.items():
                pname = _param_name(names, p)
                param = params.get(pname)
                if param is not None and not param.is_constexpr:
                    spec[pname] = f"specialized to the constant {v!r} (Triton specializes integers equal to 1)"
            for p, values in attrs.items():
                pname = _param_name(names, p)
                for attr in values:
                    if isinstance(attr, (list, tuple)) and len(attr) == 2:
                        label = ("divisible by" if attr[0] == "tt.divisibility" else attr[0])
                        spec[pname] = f"{label} {attr[1]}" if pname not in spec else spec[pname] + f"; {label} {attr[1]}"
            entry["specialization"] = spec
            entry["options"] = {k: _plain(getattr(opts, k)) for k in ("num_warps", "num_stages", "num_ctas",
                                                                      "maxnreg", "grf_mode") if hasattr(opts, k)}
            src = ASTSource(fn, signature, constexprs, attrs)
            log = io.StringIO()
            with contextlib.redirect_stdout(log), _native_stderr(self.job_dir) as native:
                compiled = self.triton.compile(src, target=self.target, options=opts.__dict__)
            self._record(entry, compiled, log.getvalue())
        except Exception as exc:  # a kernel that does not compile for this target is a result
            failure = classify(exc, self.path, jit_functions=self.jit_functions, during=f"compiling {name}")
            entry["error"] = failure.reason
            entry["line"] = failure.line
            entry["error_text"] = failure.error_text
            # a failed MLIR pass raises "PassManager::run failed"; why, and where, it wrote to stderr
            diagnostics, headline, line = compiler_diagnostics(native.getvalue() if native else "",
                                                               str(self.path) if self.path else None)
            if diagnostics:
                entry["error"] = f"{failure.reason}: {headline}"
                entry["line"] = failure.line or line
                entry["error_text"] = (failure.error_text + "\n" if failure.error_text else "") + diagnostics
        entry["compile_seconds"] = round(time.perf_counter() - started, 3)

    def _record(self, entry: dict[str, Any], compiled: Any, log: str) -> None:
        md = compiled.metadata
        raw = md._asdict() if hasattr(md, "_asdict") else dict(getattr(md, "__dict__", {}))
        metadata = {k: _plain(v) for k, v in raw.items() if k not in ("target", "extern_libs", "hash")}
        entry["metadata"] = metadata
        for stage, text in compiled.asm.items():
            if stage in _SKIP_STAGES or not isinstance(text, str):
                continue
            if self.path:  # the job's temporary path means nothing outside the job: keep the file name
                text = text.replace(self.path, Path(self.path).name)
            if len(text) > MAX_IR_CHARS:
                text = text[:MAX_IR_CHARS]
                entry["truncated"].append(stage)
            entry["ir"][stage] = text
        entry["resources"] = resource_summary(self.target_data["backend"], metadata, entry["ir"], log,
                                              str(metadata.get("name") or entry["name"]))


def _xpu_target(t: dict[str, Any], notes: list[str]) -> Any:
    """For an Intel target: this machine's Intel GPU when one is present (its own device
    properties, from the driver), else ``None`` (the registry's properties are used, with
    Intel's backend told which architecture they describe). Not exercised on the CPU machine,
    which has no Intel backend."""
    import torch

    if hasattr(torch, "xpu") and torch.xpu.is_available():
        from triton.runtime import driver

        notes.append(f"compiled for this machine's Intel GPU ({torch.xpu.get_device_name(0)}) rather than the "
                     f"generic {t['label']} properties")
        return driver.active.get_current_target()
    arch = (t.get("extra") or {}).get("device_arch")
    if arch:
        with contextlib.suppress(Exception):  # older Intel backends have no such knob
            from triton import knobs

            knobs.intel.device_arch = arch
    return None


def _target_available(backend: str) -> str:
    """``""`` when the installed Triton has the backend for ``backend`` (cuda/hip/xpu)."""
    from triton.backends import backends

    name = triton_backend_for(backend)
    if name in backends:
        return ""
    return (f"the installed Triton has no {name} backend (it has: {', '.join(sorted(backends)) or 'none'})"
            + ("; Intel's backend comes with PyTorch's xpu build (pytorch-triton-xpu)" if name == "intel" else ""))


def _model(job: dict[str, Any], job_dir: Path, loaded: Any, inits: list[Any], device: Any, dtype: Any,
           problem_inputs: Any) -> Any:
    """The model whose forward() launches the kernels: the module's class, or for a ``function``
    entry (KernelAgent's ``kernel_function``) that function bound to the problem's reference
    ``Model`` and its parameters (adapted by its format, ``worker.formats``), as the verifier
    calls it."""
    from xeforge_core.worker.inputs import construct_model

    adapt = loaded.adapter()
    if adapt is None:
        return construct_model(loaded, inits, 0, device, dtype)

    source = job.get("reference")
    binding = (load_module(job_dir, dict(source, label="binding", entry="class", class_name="Model"))
               if source else problem_inputs)
    if binding is None:
        raise WorkerError(Failure(VerdictKind.RUNTIME_ERROR,
                                  f"{loaded.path.name} defines {loaded.class_name}() but there is no problem "
                                  "Model to bind its parameters to"))
    reference = construct_model(binding, inits, 0, device, dtype)
    return adapt(loaded.entry_function(), reference, forward_params(binding.model_class()))


def _not_launched(jit_functions: list[Any], launched: set[str]) -> list[str]:
    """Kernels the module defines that ``forward()`` did not launch, leaving out the
    ``@triton.jit`` helpers that a launched kernel calls (directly or through another helper):
    those are compiled into it."""
    import re

    sources = {getattr(getattr(f, "fn", None), "__name__", ""): str(getattr(f, "src", "") or "")
               for f in jit_functions}
    reached = set(launched)
    frontier = list(launched)
    while frontier:
        body = sources.get(frontier.pop(), "")
        for name in sources:
            if name and name not in reached and re.search(rf"\b{re.escape(name)}\s*\(", body):
                reached.add(name)
                frontier.append(name)
    return [n for n in sources if n and n not in reached]


def run(job: dict[str, Any], job_dir: Path) -> dict[str, Any]:
    """Compile the job's module for its target (see the module docstring); returns the result."""
    say = _Progress(job_dir)
    say("importing torch and triton")
    import torch
    import triton

    from xeforge_core.worker.inputs import build_inputs, dtype_from_name, init_values

    result: dict[str, Any] = {"role": "ir", "kind": "ok", "reason": "", "line": None, "error_text": "",
                              "triton_version": triton.__version__, "target": job.get("target"),
                              "variant": (job.get("variant") or {}).get("name"), "launches": 0,
                              "notes": [], "kernels": [], "not_launched": []}
    missing = _target_available(job["target"]["backend"])
    if missing:
        result.update(kind="unavailable", reason=missing)
        return result
    try:
        compiler = _Compiler(job, say)
    except Exception as exc:  # e.g. Intel's backend present but unable to describe the target
        result.update(kind="unavailable", reason=f"Triton cannot set up the {job['target']['label']} target "
                                                 f"here: {type(exc).__name__}: {exc}",
                      error_text=traceback.format_exc()[-4000:])
        return result
    say("importing the module")
    try:
        loaded = load_module(job_dir, job["module"])
    except WorkerError as err:
        f = err.failure
        result.update(kind=f.kind.value, reason=f.reason, line=f.line, error_text=f.error_text)
        return result
    compiler.path = loaded.file
    compiler.jit_functions = loaded.jit_functions
    compiler.job_dir = job_dir
    variant = job.get("variant") or {"name": "module", "params": [], "dims": {}}
    cpu = torch.device("cpu")
    during = "building the model and its inputs"
    compiler.install()
    try:
        dtype = dtype_from_name(variant["dtype"]) if variant.get("dtype") else None
        # inputs from the problem file when the job has one (KernelBench's solutions define only
        # ModelNew), else from the module itself, as the verifier's harness does
        problem_inputs = load_module(job_dir, dict(job["inputs"], label="inputs")) if job.get("inputs") else None
        input_source = problem_inputs or loaded
        init_source = next((m for m in (problem_inputs, loaded) if m is not None
                            and hasattr(m.module, "get_init_inputs")), input_source)
        model = _model(job, job_dir, loaded, init_values(init_source, variant), cpu, dtype, problem_inputs)
        args = build_inputs(input_source, job.get("spec"), variant, 0, "normal", cpu)
        during = "running forward() to record the kernel launches"
        say(during)
        with torch.no_grad():
            model(*args)
    except WorkerError as err:
        f = err.failure
        result.update(kind=f.kind.value, reason=f.reason, line=f.line, error_text=f.error_text)
    except Exception as exc:
        f = classify(exc, loaded.file, jit_functions=loaded.jit_functions, during=during)
        result.update(kind=f.kind.value, reason=f.reason, line=f.line, error_text=f.error_text)
    finally:
        compiler.uninstall()
    result["launches"] = compiler.launches
    result["kernels"] = compiler.kernels
    result["notes"] = compiler.notes
    result["not_launched"] = _not_launched(loaded.jit_functions, {k["name"] for k in compiler.kernels})
    if result["kind"] == "ok" and not compiler.kernels:
        result.update(kind="runtime_error", reason="forward() launched no Triton kernel, so there is nothing to "
                                                   "compile")
    elif result["kind"] == "ok" and any(k["error"] for k in compiler.kernels):
        first = next(k for k in compiler.kernels if k["error"])
        result.update(kind="compile_error", reason=first["error"], line=first["line"])
    return result


def main(argv: list[str] | None = None) -> int:
    """``main(["JOB_DIR"])``: run the job and write ``result.json``; 0 once a result is written,
    2 for a bad command line or an unreadable job."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 1:
        print("usage: python -m xeforge_core.ir.worker JOB_DIR", file=sys.stderr)
        return 2
    job_dir = Path(argv[0]).resolve()
    try:
        job = read_job(job_dir)
    except (OSError, ValueError) as exc:
        print(f"cannot read the job in {job_dir}: {exc}", file=sys.stderr)
        return 2
    # compile, never interpret; keep ptxas's resource report (registers, spills)
    os.environ["TRITON_INTERPRET"] = "0"
    os.environ["TRITON_DUMP_PTXAS_LOG"] = "1"
    os.chdir(job_dir)
    try:
        result = run(job, job_dir)
    except Exception as exc:  # the harness itself failed
        result = {"role": "ir", "kind": "runtime_error",
                  "reason": f"the IR worker could not run the job: {type(exc).__name__}: {exc}",
                  "error_text": traceback.format_exc()[-6000:], "kernels": []}
    write_result(job_dir, result, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
