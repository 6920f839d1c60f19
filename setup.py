"""Build odradek's one optional C accelerator (the produce path's record walk).

Everything else is in pyproject.toml. The extension is optional: without a C
compiler or Python headers the install goes on and odradek uses the Python
walker in odradek/protocol/record_scan.py, which gives the same answers.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "odradek.protocol._record_walk",
            sources=["odradek/protocol/_record_walk.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
