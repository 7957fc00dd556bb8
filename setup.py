"""Only the C extension is declared here; everything else about the package is in pyproject.toml.

The extension is optional: where it cannot be compiled, rag_eval runs its pure-Python twins (same results,
slower), and `rag_eval.speedups_enabled()` says which is in use.
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
