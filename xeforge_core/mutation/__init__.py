"""Single-fault copies of a correct Triton kernel module (mutation testing of the verifier).

``generate(source)`` returns one ``Mutant`` per fault class that applies to the module (see
``MUTATION_CLASSES``): each is the module with exactly one realistic fault planted by a libcst
rewrite, with the class, the line and the exact edit recorded. A rewrite that does not parse or
does not change the code is discarded. ``benchmarks/bench_mutants.py`` verifies the mutants and
reports how many the verifier refuses.
"""

from xeforge_core.mutation.generate import MUTATION_CLASSES, Mutant, generate

__all__ = ["MUTATION_CLASSES", "Mutant", "generate"]
