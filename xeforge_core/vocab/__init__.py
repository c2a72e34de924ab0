"""The vocabulary every layer shares, at the bottom of the package: data, standard library only.

* ``stages``: the one list of stages (portability first, then the nine) and their codemods;
* ``status``: the states of a stage, an outcome, a candidate and an attempt;
* ``target``: the device family (:class:`~xeforge_core.vocab.target.Family`) and the
  :class:`~xeforge_core.vocab.target.Target` a session optimizes for;
* ``roofline``: attainable TFLOP/s and the ridge point of a device's peak and bandwidth.

Nothing here imports another module of the package except its siblings; every other module
may import these. Import the submodules themselves; this package's top level imports nothing.
"""
