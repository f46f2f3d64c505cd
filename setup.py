"""Build hook for the one compiled module; all other metadata lives in pyproject.toml.

``structgen.fsm._trie_walk`` (fsm/_trie_walk.c) is optional: without a C compiler the build
skips it and the token FSM uses its pure-numpy walk (same results, slower first-visit rows).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("structgen.fsm._trie_walk", ["fsm/_trie_walk.c"], optional=True, extra_compile_args=["-O3"]),
    ]
)
