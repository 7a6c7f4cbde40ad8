"""Shared test setup: GPU-marked tests skip cleanly where jax sees no GPU."""

import os

import jax
import pytest


def _has_gpu() -> bool:
    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


def pytest_collection_modifyitems(config, items):
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a GPU; jax sees none on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# The train command turns JAX's persistent compilation cache on by default (~/.cache/jaxsim/xla);
# tests keep it off unless they ask for it, so they write nothing outside their tmp folders.
os.environ.setdefault("JAXSIM_COMPILATION_CACHE", "off")


@pytest.fixture(autouse=True, scope="module")
def _drop_compiled_programs():
    # Each module compiles its own programs; keeping every module's executables alive made the
    # test process reach 6-7 GB. Dropping them between modules keeps it near one module's worth.
    yield
    jax.clear_caches()
