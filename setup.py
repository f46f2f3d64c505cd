"""Build hook for the compiled modules; all other metadata lives in pyproject.toml.

``structgen.fsm._trie_walk`` (fsm/_trie_walk.c), ``structgen.fsm._lazy_expand``
(fsm/_lazy_expand.c), ``structgen.fsm._minimize`` (fsm/_minimize.c) and ``structgen.fsm._paths``
(fsm/_paths.c) are optional: without a C compiler the build skips them and the token FSM uses its
pure-numpy walk, the Python subset construction, numpy's Moore refinement and numpy / Python path
searches (same results, slower first-visit rows, automaton states, minimization and distances).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("structgen.fsm._trie_walk", ["fsm/_trie_walk.c"], optional=True, extra_compile_args=["-O3"]),
        Extension("structgen.fsm._lazy_expand", ["fsm/_lazy_expand.c"], optional=True, extra_compile_args=["-O3"]),
        Extension("structgen.fsm._minimize", ["fsm/_minimize.c"], optional=True, extra_compile_args=["-O3"]),
        Extension("structgen.fsm._paths", ["fsm/_paths.c"], optional=True, extra_compile_args=["-O3"]),
    ]
)
