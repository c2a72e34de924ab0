"""Enumerate and force ``@triton.autotune`` configs.

Before the module under test is executed, ``install_shim`` wraps ``triton.autotune`` so every
``Autotuner`` the module creates is recorded with its list of ``triton.Config``. Correctness then
checks each config on its own: ``AutotuneRegistry.select`` narrows an autotuner to one config
(Triton's ``Autotuner.run`` launches the single config directly, without benchmarking), and the
kernel is launched with that config's kwargs, ``num_warps`` and ``num_stages``; a callable grid
is evaluated with the resulting META dict by Triton itself.

On a GPU, autotuners not selected keep all their configs and tune as usual: the first call at
each key runs every config on the call's own arguments while it benchmarks them, so a kernel that
rewrites a buffer it reads, or adds into one, without ``restore_value``/``reset_to_zero`` returns
what the last benchmarked configs left there. What a tuner learnt at a key survives the checks of
single configs in between, as in a user's process: each key is tuned once, not once per run. On
cpu the autotuner cannot time anything ("0 active drivers"), so its first call runs every config
once on those arguments, timed alike (the first config wins), with Triton's own pre- and
post-hooks (:func:`run_once`): the same side effects a GPU's benchmarking has, in the
interpreter. After that first call every autotuner is narrowed to one config (the first unless
another is selected).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import triton

from xeforge_core.compile_options import CONFIG_LAUNCH_OPTIONS


@dataclass
class TunerEntry:
    """One recorded autotuner: its kernel name and original configs."""

    tuner: Any
    name: str
    configs: list[Any]
    #: whether it has made its first call (on cpu: every config run once on its arguments)
    tuned: bool = False


def run_once(kernel_call: Any, quantiles: Any = None) -> list[float]:
    """The autotuner's benchmark in Triton's interpreter: ``kernel_call`` (one config, with the
    autotuner's pre- and post-hooks) run once, every config timed alike so the first wins."""
    kernel_call()
    return [1.0, 1.0, 1.0]


def describe_config(name: str, config: Any) -> str:
    """``kernel[BLOCK_M=32, BLOCK_N=32, num_warps=4, num_stages=2]``."""
    parts = [f"{k}={v}" for k, v in getattr(config, "kwargs", {}).items()]
    for attr in ("num_warps", "num_stages"):
        val = getattr(config, attr, None)
        if val is not None:
            parts.append(f"{attr}={val}")
    return f"{name}[{', '.join(parts)}]"


#: What ``triton.runtime.autotuner.Autotuner._bench`` catches while it benchmarks the configs,
#: timing the config as infinitely slow (Triton 3.6): a config that does not fit the device (shared
#: memory, registers) or fails a ``tl.static_assert`` is skipped there, never run in a user's
#: process, so forcing it alone is no fault of the kernel.
SKIPPED_BY_TUNER = ("OutOfResources", "CompileTimeAssertionFailure", "PTXASError")


def skipped_by_autotuner(exc: BaseException) -> BaseException | None:
    """The exception in ``exc``'s chain (its causes and contexts) that Triton's autotuner would
    have caught and skipped the config for (:data:`SKIPPED_BY_TUNER`), else ``None``."""
    from xeforge_core.worker.errors import exception_chain

    return next((e for e in exception_chain(exc) if type(e).__name__ in SKIPPED_BY_TUNER), None)


def skipped_config_note(config: str, exc: BaseException) -> str:
    """The warning for a forced ``config`` that raised ``exc`` (:func:`skipped_by_autotuner`)."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    return (f"autotune config {config} is not checked: it does not compile for this device ({type(exc).__name__}: "
            f"{first}); Triton's autotuner skips such a config when it benchmarks the configs, so it never runs")


#: A config's launch options besides its meta-parameters (``triton.Config``'s keywords: those it
#: lays over the dict, ``compile_options.CONFIG_LAUNCH_OPTIONS``, and the ones that default to None).
_LAUNCH_OPTIONS = frozenset(CONFIG_LAUNCH_OPTIONS) | {"maxnreg", "num_buffers_warp_spec", "num_consumer_groups",
                                                      "reg_dec_producer", "reg_inc_consumer"}


class AutotuneRegistry:
    """Autotuners created by the module under test, and which config each one runs.

    ``interpreter``: true on cpu (every autotuner always narrowed to a single config).
    """

    def __init__(self, interpreter: bool) -> None:
        self.interpreter = interpreter
        #: run every config on the first call, as a GPU's benchmarking does (cpu, unless a caller
        #: chooses each config itself: :meth:`narrow_always`)
        self.benchmark_first_call = interpreter
        self.entries: list[TunerEntry] = []
        self._selection: dict[int, int] = {}

    def add(self, tuner: Any) -> None:
        """Record an ``Autotuner`` created by the module under test."""
        base = getattr(tuner, "base_fn", None)
        name = getattr(base, "__name__", None) or getattr(getattr(tuner, "fn", None), "__name__", "kernel")
        entry = TunerEntry(tuner=tuner, name=name, configs=list(tuner.configs))
        self.entries.append(entry)
        if self.interpreter:
            tuner._do_bench = run_once
            first_run = tuner.run

            def run(*args: Any, **kwargs: Any) -> Any:
                try:
                    return first_run(*args, **kwargs)
                finally:
                    if not entry.tuned:
                        entry.tuned = True
                        self._apply()

            tuner.run = run
        self._apply()

    def _apply(self) -> None:
        for i, entry in enumerate(self.entries):
            if i in self._selection:
                entry.tuner.configs = [entry.configs[self._selection[i]]]
            elif self.interpreter:
                first = self.benchmark_first_call and not entry.tuned
                entry.tuner.configs = list(entry.configs) if first else [entry.configs[0]]
            else:
                entry.tuner.configs = list(entry.configs)
            if self.interpreter:
                entry.tuner.cache = {}
            # on a GPU what a tuner learnt at a key survives the checks of single configs (a tuner
            # with one config reads no cache): a user's process tunes once per key, not per run

    def narrow_always(self) -> None:
        """From now on narrow every autotuner to one config (the first unless another is
        selected), as on cpu, without a first call that runs them all: for callers that choose
        each config themselves."""
        self.interpreter = True
        self.benchmark_first_call = False
        self._apply()

    def variants(self) -> list[tuple[int, int, str]]:
        """Every (autotuner index, config index, description) to check on its own."""
        out = []
        for i, entry in enumerate(self.entries):
            for j, cfg in enumerate(entry.configs):
                out.append((i, j, describe_config(entry.name, cfg)))
        return out

    def same_in_interpreter(self, tuner_index: int, config_index: int) -> bool:
        """Whether config ``config_index`` of autotuner ``tuner_index`` has the meta-parameters of
        an earlier config of the same autotuner and nothing else that could tell them apart: in
        Triton's interpreter ``num_warps``, ``num_stages`` and the launch options change nothing
        a kernel computes, so such a config's check repeats the earlier one's. Not where the
        kernel has a parameter of one of those names (the interpreter passes the config's value
        in, and the grid reads it) or a config has a pre-hook (it is given them)."""
        entry = self.entries[tuner_index]
        configs = entry.configs
        names = set(getattr(entry.tuner, "arg_names", None) or [])
        if names & _LAUNCH_OPTIONS or any(getattr(c, "pre_hook", None) is not None for c in configs):
            return False

        def key(cfg: Any) -> tuple[Any, ...]:
            return tuple(sorted((k, repr(v)) for k, v in (getattr(cfg, "kwargs", None) or {}).items()))

        own = key(configs[config_index])
        return any(key(c) == own for c in configs[:config_index])

    def default_description(self) -> str | None:
        """What runs when nothing is selected: on cpu the first config of each autotuner."""
        if not self.entries:
            return None
        if self.interpreter:
            return "; ".join(describe_config(e.name, e.configs[0]) for e in self.entries)
        return "autotuned"

    @contextmanager
    def select(self, tuner_index: int, config_index: int) -> Iterator[None]:
        """Within the block, autotuner ``tuner_index`` runs only config ``config_index``."""
        self._selection = {tuner_index: config_index}
        self._apply()
        try:
            yield
        finally:
            self._selection = {}
            self._apply()


def chosen_configs(registry: AutotuneRegistry, module: Any) -> list[str]:
    """The config each autotuner defined in ``module`` settled on (``describe_config`` text),
    after it has tuned; autotuners of other modules and those that never tuned are left out."""
    owned = {id(v) for v in vars(module).values()} if module is not None else set()
    out = []
    for entry in registry.entries:
        best = getattr(entry.tuner, "best_config", None)
        if best is not None and id(entry.tuner) in owned:
            out.append(describe_config(entry.name, best))
    return out


_ORIGINAL = triton.autotune


def install_shim(registry: AutotuneRegistry) -> None:
    """Replace ``triton.autotune`` (and its aliases in ``triton.runtime``) so decorators
    executed from now on record their ``Autotuner`` in ``registry``."""

    def autotune(*args: Any, **kwargs: Any) -> Any:
        decorator = _ORIGINAL(*args, **kwargs)

        def wrap(fn: Any) -> Any:
            tuner = decorator(fn)
            registry.add(tuner)
            return tuner

        return wrap

    autotune.__doc__ = _ORIGINAL.__doc__
    import triton.runtime.autotuner as autotuner_mod

    triton.autotune = autotune
    triton.runtime.autotune = autotune
    autotuner_mod.autotune = autotune
