"""TorchInductor's Triton kernels as the first version of a plain-PyTorch problem.

* :mod:`.generate` (worker process): trace the problem with ``torch.compile`` and take
  Inductor's output code; on a machine without a GPU through a stand-in driver (:mod:`.driver`).
* :mod:`.capture` (caller): run that job sandboxed; save and load captures (JSON).
* :mod:`.kernels`, :mod:`.launch`, :mod:`.naming`, :mod:`.shims`, :mod:`.index_width`,
  :mod:`.layout`, :mod:`.convert`: read the output code and write a standalone ``ModelNew`` module from it.
* :mod:`.first_version`: the whole step for a problem (capture + convert), as the rules engine
  and the workbench use it.
"""
