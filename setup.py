"""Build hook for the C extensions; everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

FLAGS = ["-O2", "-std=c99"]
RECORDS = ["retrace/trace/records.h"]  # the scanner's output, which the replay compiler reads

setup(
    ext_modules=[
        Extension(
            "retrace.trace._scanner",
            sources=["retrace/trace/_scanner.c"],
            depends=RECORDS,
            extra_compile_args=FLAGS,
        ),
        Extension(
            "retrace.trace._dump",
            sources=["retrace/trace/_dump.c"],
            depends=RECORDS,
            extra_compile_args=FLAGS,
        ),
        Extension(
            "retrace.replay._vm",
            sources=["retrace/replay/_vm.c"],
            depends=RECORDS,
            extra_compile_args=FLAGS,
        ),
        Extension(
            "retrace.replay._guard",
            sources=["retrace/replay/_guard.c"],
            extra_compile_args=FLAGS,
        ),
        Extension(
            "retrace.writer._tsv",
            sources=["writer/_tsv.c"],
            extra_compile_args=FLAGS,
        ),
    ]
)
