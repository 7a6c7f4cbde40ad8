"""`rollout(..., out=previous)`: a rollout written into an earlier trajectory's donated buffers."""

from __future__ import annotations

import functools
import threading
import warnings
import weakref

import jax

from jaxsim.core import Env
from jaxsim.trajectory import STEP_OUTPUTS, Trajectory


def check_out(env: Env, out, n: int, num_envs: int, outputs, backend: str, auto: bool, mesh):
    """The per-step buffers `out=` donates, in `STEP_OUTPUTS` order, or an error before any work.

    Shapes and dtypes that depend on the policy (extras) are checked when the rollout is traced,
    which is also before anything runs or is donated (`record_scan(..., into=)`).
    """
    if not isinstance(out, Trajectory):
        raise TypeError(
            f"rollout: out must be a Trajectory returned by an earlier rollout, got "
            f"{type(out).__name__}"
        )
    # Only the scan backend writes its trajectory through record_scan's loop buffers; the fused
    # kernel and a mesh's sharded outputs allocate their own, so out= there would not reuse.
    if backend == "fused":
        chosen = "backend='auto' runs the fused kernel here" if auto else "backend='fused'"
        raise ValueError(
            f"rollout: out= reuses the scan backend's output buffers, and {chosen}, which "
            f"writes outputs of its own: pass backend='scan' with out=, or leave out= off"
        )
    if mesh is not None:
        raise ValueError(
            "rollout: out= is not supported with mesh=: sharded outputs are placed per device "
            "by the partitioner, so their buffers would not be reused (leave out= off)"
        )
    kept = tuple(name for name in STEP_OUTPUTS if name in outputs)
    # Kept extras of a policy without any are {} (no buffer): whether out.extras fits this
    # policy's extras is checked against the traced policy (check_into).
    held = tuple(name for name in STEP_OUTPUTS if getattr(out, name) is not None)
    if [x for x in held if x != "extras"] != [x for x in kept if x != "extras"] or (
        "extras" in held and "extras" not in kept
    ):
        raise ValueError(
            f"rollout: out= holds the per-step fields {list(held)} but outputs= keeps "
            f"{list(kept)}: pass the outputs= the earlier rollout was run with"
        )
    if not kept:
        raise ValueError(
            f"rollout: out= needs per-step outputs to reuse; outputs={list(outputs)} keeps none"
        )
    state = out.final_state
    if state is not None and not isinstance(state.env_state, env.state_type):
        raise ValueError(
            f"rollout: out= comes from a rollout of {type(state.env_state).__name__} "
            f"environments, but {env.id} steps {env.state_type.__name__}"
        )
    seen: dict[int, str] = {}
    for name in kept:
        paths = jax.tree_util.tree_flatten_with_path(getattr(out, name))[0]
        for path, leaf in paths:
            where = f"out.{name}{jax.tree_util.keystr(path)}"
            if isinstance(leaf, DonatedBuffer) or (
                isinstance(leaf, jax.Array) and leaf.is_deleted()
            ):
                raise ValueError(
                    f"rollout: {where} was deleted (already donated to a later rollout): pass "
                    f"the newest trajectory as out="
                )
            if isinstance(leaf, jax.core.Tracer) or not isinstance(leaf, jax.Array):
                raise TypeError(
                    f"rollout: {where} must be a concrete jax.Array to donate (out= does not "
                    f"apply under jit or to numpy arrays), got {type(leaf).__name__}"
                )
            if leaf.shape[:2] != (n, num_envs):
                raise ValueError(
                    f"rollout: {where} has shape {leaf.shape}; this rollout writes "
                    f"[n, num_envs, ...] = [{n}, {num_envs}, ...]"
                )
            if id(leaf) in seen:
                raise ValueError(f"rollout: {where} is the same array as {seen[id(leaf)]}")
            seen[id(leaf)] = where
    _donor.pending = (weakref.ref(out), kept)  # marked by `donating` once the call donated
    return tuple(getattr(out, name) for name in kept)


# ------------------------------------------------------------------------ a donated trajectory
class DonatedBuffer:
    """What a `Trajectory` holds, after `rollout(..., out=traj)`, in place of each per-step
    buffer that rollout donated: any use raises a RuntimeError that says so (JAX's own error
    for the deleted array, "Array has been deleted", names nothing). Its repr does not raise."""

    __slots__ = ("dtype", "shape", "where")

    def __init__(self, where: str, shape: tuple[int, ...], dtype):
        self.where, self.shape, self.dtype = where, shape, dtype

    def _donated(self, *args, **kwargs):
        raise RuntimeError(
            f"{self.where} ({self.dtype}{list(self.shape)}) was donated by rollout(..., out=): "
            "the later rollout wrote its own values into this buffer and the array was deleted; "
            "use the trajectory that rollout returned (or copy what you need first, e.g. "
            "np.array(traj.obs), before passing traj as out=)"
        )

    def __getattr__(self, name: str):
        if name.startswith("__"):  # protocol probes (hasattr) get the usual answer
            raise AttributeError(name)
        self._donated()

    def __repr__(self) -> str:
        return f"<{self.where}: donated by rollout(out=)>"


for _op in (
    "array jax_array getitem iter len bool float int index neg pos abs invert lt le gt ge add "
    "radd sub rsub mul rmul truediv rtruediv floordiv rfloordiv mod rmod pow rpow matmul "
    "rmatmul and rand or ror xor rxor lshift rshift"
).split():
    setattr(DonatedBuffer, f"__{_op}__", DonatedBuffer._donated)

_donor = threading.local()  # .pending: (weakref to the out= Trajectory, its donated fields)


def _mark_donated() -> None:
    """In the `Trajectory` passed as out=, each buffer the call donated (now deleted) becomes
    a `DonatedBuffer` naming out=; the trajectory is frozen, but its arrays are gone anyway."""
    pending, _donor.pending = getattr(_donor, "pending", None), None
    traj = pending[0]() if pending else None
    if traj is None:
        return
    for name in pending[1]:

        def stand_in(path, x, name=name):
            if isinstance(x, jax.Array) and x.is_deleted():
                where = f"Trajectory.{name}{jax.tree_util.keystr(path)}"
                return DonatedBuffer(where, x.shape, x.dtype)
            return x

        fields = jax.tree_util.tree_map_with_path(stand_in, getattr(traj, name))
        object.__setattr__(traj, name, fields)


def check_into(into, expected, owner: str = "rollout: out") -> None:
    """Raises, at trace time, where the donated buffers `into` differ from the loop's outputs."""
    want = jax.tree_util.tree_flatten_with_path(expected)
    got = jax.tree_util.tree_flatten_with_path(into)
    if want[1] != got[1]:
        raise ValueError(
            f"{owner}= holds buffers {got[1]} but this rollout writes {want[1]} (a policy with "
            f"other extras?)"
        )
    for (path, buf), (_, aval) in zip(got[0], want[0], strict=True):
        if buf.shape != aval.shape or buf.dtype != aval.dtype:
            name, *rest = path  # the field's name, then the path inside extras
            where = f"{owner}.{name.key}{jax.tree_util.keystr(tuple(rest))}"
            raise ValueError(
                f"{where} is {buf.dtype}{list(buf.shape)}; this rollout writes "
                f"{aval.dtype}{list(aval.shape)} there"
            )


def donating(jitted):
    """`jitted`, raising where XLA could not write an output into a donated buffer.

    JAX only warns when a donated buffer fits no output, then allocates fresh ones: out= would
    silently not reuse. The warning comes while compiling, before anything runs, and a failed
    compile caches nothing, so every such call raises.
    """

    @functools.wraps(jitted)
    def run(*args):
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="Some donated buffers were not usable")
            try:
                result = jitted(*args)
            except UserWarning as err:
                _donor.pending = None  # nothing was donated
                raise ValueError(
                    f"rollout: out= could not be reused: {str(err).splitlines()[0]}"
                ) from None
        _mark_donated()
        return result

    return run
