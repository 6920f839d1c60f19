"""Build odradek's optional C accelerators: the produce path's record walk
(protocol/_record_walk.c) and the Spark reader's walk of records into Arrow
buffers (spark/_arrow_walk.c; without it spark/arrow_records.py walks in Python)
and the Spark sink's encoding of Arrow columns into records (spark/_batch_encode.c;
without it spark/batch_encode.py encodes in Python).

Everything else is in pyproject.toml. The extension is optional: without a C
compiler or Python headers the install goes on and odradek uses the Python
walkers (odradek/protocol/record_scan.py, odradek/spark/arrow_records.py),
which give the same answers.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "odradek.protocol._record_walk",
            sources=["odradek/protocol/_record_walk.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "odradek.spark._arrow_walk",
            sources=["odradek/spark/_arrow_walk.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "odradek.spark._batch_encode",
            sources=["odradek/spark/_batch_encode.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
