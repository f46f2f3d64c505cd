"""Build hook for the one compiled module; all other metadata lives in pyproject.toml.

``structgen.fsm._trie_walk`` (fsm/_trie_walk.c) and ``structgen.fsm._lazy_expand``
(fsm/_lazy_expand.c) are optional: without a C compiler the build skips them and the token FSM
uses its pure-numpy walk and the Python subset construction (same results, slower first-visit
rows and automaton states).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("structgen.fsm._trie_walk", ["fsm/_trie_walk.c"], optional=True, extra_compile_args=["-O3"]),
        Extension("structgen.fsm._lazy_expand", ["fsm/_lazy_expand.c"], optional=True, extra_compile_args=["-O3"]),
    ]
)
