"""`backend="auto"`'s guard: the fused kernel compiled once per configuration, or the scan."""

from __future__ import annotations

import jax

# configuration -> None (the kernel compiled) or why it did not. Per process: a configuration
# that failed keeps running on the scan without trying (and warning) again.
_OUTCOMES: dict = {}


class KernelCompileError(RuntimeError):
    """The fused kernel failed to compile for a configuration `backend="auto"` chose it for.

    `first` is True for the call that tried (and should warn), False for later ones.
    """

    def __init__(self, reason: str, first: bool):
        super().__init__(reason)
        self.reason = reason
        self.first = first


def _compile(lowered):
    """Compiles a lowered rollout (the hook tests replace to simulate a failing compiler)."""
    return lowered.compile()


def _abstract(x):
    aval = jax.api_util.shaped_abstractify(x)
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type)


def call(fn, static_args: tuple, dynamic_args: tuple, auto: bool):
    """`fn(*static_args, *dynamic_args)`; with `auto`, compiled first, once per configuration.

    A configuration is the static arguments and the dynamic ones' shapes and dtypes. Its first
    call lowers and compiles `fn` from abstract shapes (under an outer jit too), which jax's
    cache then serves to the call itself; if that fails, this and every later call of the
    configuration raise `KernelCompileError` naming the reason, for the caller to fall back.
    Without `auto` a failure propagates as it is.
    """
    if auto:
        leaves, treedef = jax.tree.flatten(dynamic_args)
        abstract = [_abstract(x) for x in leaves]
        shapes = tuple((a.shape, str(a.dtype), a.weak_type) for a in abstract)
        key = (getattr(fn, "__qualname__", repr(fn)), static_args, treedef, shapes)
        if key not in _OUTCOMES:
            try:
                _compile(fn.lower(*static_args, *jax.tree.unflatten(treedef, abstract)))
                _OUTCOMES[key] = None
            except Exception as err:  # whatever the lowering or the compiler raises
                _OUTCOMES[key] = f"{type(err).__name__}: {err}".strip()
                raise KernelCompileError(_OUTCOMES[key], first=True) from err
        elif _OUTCOMES[key] is not None:
            raise KernelCompileError(_OUTCOMES[key], first=False)
    return fn(*static_args, *dynamic_args)
