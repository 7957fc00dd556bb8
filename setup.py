"""Only the C extension is declared here; everything else about the package is in pyproject.toml.

The extension (rag_eval/_speedups.c: the TREC reader's loop and the grade lookup of the ids it packs, described at
its top) is optional: where it cannot be compiled, rag_eval runs its pure-Python twins (same results, slower).
`rag_eval._accel.speedups` is the module in use, or None; `RAG_EVAL_PURE_PYTHON=1` selects the twins even where it
is built.
"""

import numpy
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "rag_eval._speedups",
            ["rag_eval/_speedups.c"],
            include_dirs=[numpy.get_include()],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
