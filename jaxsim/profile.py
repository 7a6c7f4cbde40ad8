"""Deprecated: `python -m jaxsim.profile` is now `python -m jaxsim.profiler` (as torch.profiler).

`jaxsim.profile` is the profiling function, `jaxsim.profile(fn)`; this file only keeps the old
command working for a release. Importing it as a module is an error: it would shadow the
function.
"""

import sys

if __name__ != "__main__":
    raise ImportError(
        "jaxsim.profile is the profiling function (jaxsim.profile(fn) or `with jaxsim.profile():`);"
        " its package is jaxsim.profiler, and the command `python -m jaxsim.profiler`"
    )

from jaxsim.profiler.__main__ import main

print(
    "python -m jaxsim.profile is deprecated and will be removed; use python -m jaxsim.profiler",
    file=sys.stderr,
)
main()
