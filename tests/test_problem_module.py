"""Static reading of KernelBench-style modules (nothing is executed)."""

from __future__ import annotations

import textwrap

import pytest

from xeforge_core.problem import ProblemError, read_module

MODULE = textwrap.dedent('''\
    import torch
    import torch.nn as nn
    import triton
    import triton.language as tl

    TARGET = torch.float16


    @triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])
    @triton.jit
    def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        dtype = tl.float16
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(out_ptr + offs, v.to(dtype), mask=offs < n)


    @triton.jit
    def unused_kernel(p):
        pass


    def launch(inp, w):
        assert inp.dtype in (torch.float16, torch.bfloat16), "bad dtype"
        assert w.dtype == torch.float32
        out = torch.empty_like(inp)
        scale_kernel[(1,)](inp, out, inp.numel())
        return out


    class Base(nn.Module):
        def __init__(self, a, b, c=3, *rest):
            super().__init__()
            self.w = torch.ones(1)


    class Model(Base):
        def forward(self, x, y=None):
            if y is not None and y.dtype != torch.float32:
                raise TypeError("y must be float32")
            x = x.to(TARGET)
            return self.helper(x)

        def helper(self, t):
            return launch(t, self.w)


    def get_inputs():
        return [torch.randn(8)]
    ''')


def test_classes_signatures_and_functions():
    m = read_module(MODULE, "m.py")
    assert m.model_class == "Model"
    model = m.model
    assert model.line == 37 and model.bases == ("Base",)
    assert model.init is not None and model.init_owner == "Base"
    assert model.init.params == ("a", "b", "c") and model.init.required == 2 and model.init.varargs == "rest"
    assert model.init.accepts(2) and model.init.accepts(7) and not model.init.accepts(1)
    assert model.forward.params == ("x", "y") and model.forward.required == 1
    assert m.has_get_inputs and not m.has_get_init_inputs


def test_kernels_and_launches():
    m = read_module(MODULE, "m.py")
    assert [(k.name, k.line, k.decorator_line, k.autotuned) for k in m.kernels] == [
        ("scale_kernel", 11, 9, True), ("unused_kernel", 19, 18, False)]
    assert [(launch.kernel, launch.line, launch.function) for launch in m.launches] == [("scale_kernel", 27, "launch")]


def test_dtype_constraints_follow_inputs_through_calls():
    m = read_module(MODULE, "m.py")
    got = {(c.kind, c.dtypes, c.line, c.inputs) for c in m.dtype_constraints}
    # x flows: forward -> self.helper(t) -> launch(inp) -> scale_kernel(x_ptr)
    assert ("requires", ("float16", "bfloat16"), 24, ("x",)) in got
    assert ("requires", ("float32",), 39, ("y",)) in got            # if ...: raise
    assert ("coerces", ("float16",), 41, ("x",)) in got             # x.to(TARGET), TARGET resolved
    assert ("hardcodes", ("float16",), 12, ("x",)) in got           # dtype = tl.float16 + .to(dtype)
    # w is a weight (self.w), not an input: its assertion is not an input constraint
    assert not any(c.line == 25 for c in m.dtype_constraints)


def test_ifexp_coercion():
    src = textwrap.dedent('''\
        import torch
        class Model(torch.nn.Module):
            def forward(self, x):
                x = x.half() if x.dtype != torch.float16 else x
                return x
        ''')
    (c,) = read_module(src).dtype_constraints
    assert (c.kind, c.dtypes, c.line) == ("coerces", ("float16",), 4)


def test_syntax_error_names_file_and_line():
    with pytest.raises(ProblemError) as err:
        read_module("import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x)\n        return x\n",
                    "broken.py")
    assert err.value.file == "broken.py" and err.value.line == 4
    assert "syntax error" in str(err.value) and "broken.py:4" in str(err.value)


def test_missing_model_lists_what_is_there():
    with pytest.raises(ProblemError) as err:
        read_module("import torch.nn as nn\n\nclass Net(nn.Module):\n    pass\n", "net.py")
    assert err.value.file == "net.py"
    assert "no class Model" in err.value.message and "Net (line 3)" in err.value.message
    assert "nn.Module subclasses here: Net" in err.value.message


def test_modelnew_convention():
    src = "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
    assert read_module(src).model_class == "ModelNew"
    with pytest.raises(ProblemError, match="it defines ModelNew, KernelBench's solution class"):
        read_module(src, "sol.py", class_name="Model")


def test_implicit_and_unknown_init():
    m = read_module("import torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n")
    assert m.model.init.implicit and m.model.init.params == () and m.model.init.accepts(0)
    m = read_module("from lib import Thing\nclass Model(Thing):\n    def forward(self, x):\n        return x\n")
    assert m.model.init is None  # inherited from a class we cannot see


def test_bad_text():
    with pytest.raises(ProblemError, match="empty"):
        read_module("\n  \n", "e.py")
    with pytest.raises(ProblemError, match="not valid UTF-8"):
        read_module(b"x = 1\n\xc3\x28\n", "b.py")
    with pytest.raises(ProblemError, match="limit"):
        read_module("#" * 1_000_001, "big.py")
    with pytest.raises(ProblemError, match="NUL"):
        read_module("x = 1\x00\n", "nul.py")
