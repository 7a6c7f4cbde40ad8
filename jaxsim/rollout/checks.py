"""A rollout's checks: inputs that would fail or exhaust memory, refused before any work, and
checked mode's per-step flags.

- Checked mode (`rollout(..., checks=True)`): every step flags, per environment, non-finite
  observations, rewards and policy extras, Discrete actions outside the space and params
  outside their ranges, whether or not `outputs=` keeps them. The flags accumulate in a
  `CheckState` carried beside the environments' state (elementwise, so the fused kernel carries
  it too); `raise_on_failure` turns it into one error on the host.
- Memory (`check_memory`): a rollout's env state, params and outputs against free memory.
- Buffer reuse (`check_out`, `check_into`, `donating`): `rollout(..., out=previous)` writes a
  rollout into an earlier trajectory's donated buffers.
"""

from __future__ import annotations

import functools
import threading
import warnings
import weakref

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim import params as params_lib
from jaxsim.core import Env
from jaxsim.policies import OpenLoopPolicy, split_policy_output
from jaxsim.rollout.trajectory import CHECKS, OUTPUT_PRESETS, STEP_OUTPUTS, CheckState, Trajectory
from jaxsim.sharding import to_host

# ------------------------------------------------------------------------- checked mode
_INT32 = np.iinfo(np.int32)


def _lane_bad(x, batch_shape):
    """int32[batch]: 1 where a [batch, ...] float array holds a NaN or inf."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return jnp.zeros(batch_shape, jnp.int32)
    bad = (~jnp.isfinite(x)).astype(jnp.int32)
    return bad.reshape(*batch_shape, -1).max(axis=-1) if bad.ndim > len(batch_shape) else bad


def _compare(op, x, bound):
    """`op(x, bound)` for a bound an int32 `x` cannot hold (e.g. `lt=2**31`): then constant."""
    if jnp.issubdtype(x.dtype, jnp.integer) and not _INT32.min <= bound <= _INT32.max:
        return jnp.full(x.shape, bool(getattr(np, op.__name__)(0, bound)))
    return op(x, bound)


def bad_param_lanes(spec_list, params, params_axes, batch_shape) -> jax.Array:
    """bool[batch]: True where an environment's params break their declarations (traced values).

    What `Spec.check` refuses on the host, computed on the device for checked mode: a float
    that is not finite, a value outside the declared bounds. Shared leaves count for every lane.
    """
    bad = jnp.zeros(batch_shape, bool)
    for spec in spec_list:
        if spec.kind is str:
            continue
        x = jnp.asarray(getattr(params, spec.name))
        wrong = (
            ~jnp.isfinite(x) if jnp.issubdtype(x.dtype, jnp.floating) else jnp.zeros_like(x, bool)
        )
        for bound, op in ((spec.ge, jnp.less), (spec.gt, jnp.less_equal)):
            if bound is not None:
                wrong |= _compare(op, x, bound)
        for bound, op in ((spec.le, jnp.greater), (spec.lt, jnp.greater_equal)):
            if bound is not None:
                wrong |= _compare(op, x, bound)
        per_env = getattr(params_axes, spec.name) == 0
        lead = len(batch_shape) if per_env else 0
        if wrong.ndim > lead:  # an array-valued field: any bad component spoils the lane
            wrong = wrong.reshape(*wrong.shape[:lead], -1).any(axis=-1)
        bad |= jnp.broadcast_to(wrong, batch_shape)
    return bad


def check_flags(env, obs, action, extras, record, params=None, params_axes=None) -> jax.Array:
    """int32[batch]: bit k set where CHECKS[k] failed this step.

    `obs` and `record["next_obs"]` are observation components; a Discrete action fails outside
    {0, ..., n - 1}, a Box action when not finite; `extras` (a policy's log-probabilities,
    values...) fail when not finite; `params` (this step's, per-episode draws included) fail
    outside their declarations, as `make` would refuse them. Whatever `outputs=` keeps,
    everything is checked.
    """
    shape = jnp.shape(record["reward"])
    space = env.action_space(env.default_params)
    if hasattr(space, "n"):
        bad_action = ((action < 0) | (action >= space.n)).astype(jnp.int32)
    else:
        bad_action = _lane_bad(action, shape)
    bad = {
        "obs": functools.reduce(jnp.maximum, [_lane_bad(c, shape) for c in obs]),
        "action": bad_action,
        "reward": _lane_bad(record["reward"], shape),
        "next_obs": functools.reduce(
            jnp.maximum, [_lane_bad(c, shape) for c in record["next_obs"]]
        ),
        "extras": functools.reduce(
            jnp.maximum,
            [_lane_bad(x, shape) for x in jax.tree.leaves(extras)],
            jnp.zeros(shape, jnp.int32),
        ),
    }
    if params is None:
        bad["params"] = jnp.zeros(shape, jnp.int32)
    else:
        spec_list = params_lib.specs(env.params_type)
        bad["params"] = bad_param_lanes(spec_list, params, params_axes, shape).astype(jnp.int32)
    return sum(bad[name] << k for k, name in enumerate(CHECKS))


def raise_on_failure(checks: CheckState, action_space) -> None:
    """Raises for the first failing (step, environment), in step-major order, if any.

    FloatingPointError for a non-finite value, ValueError for an out-of-range Discrete action
    alone; the message names what failed, the step, the environment and how many pairs failed.
    """
    if isinstance(checks.first_step, jax.core.Tracer):
        raise ValueError("rollout: checks=True needs concrete values; call rollout outside jit")
    # On a multi-host mesh each process holds part of the batch: gather it (every process
    # raises the same error).
    first = to_host(checks.first_step)
    failed = first >= 0
    if not failed.any():
        return
    step = int(first[failed].min())
    env = int(np.flatnonzero(first == step)[0])
    flags = int(to_host(checks.first_flags)[env])
    which = [name for k, name in enumerate(CHECKS) if flags >> k & 1]
    count = int(to_host(checks.bad_steps).sum())
    where = f"at step {step}, environment {env} (first of {count} bad (step, env) pairs)"
    if "params" in which:  # the cause of whatever else went wrong with them
        also = [name for name in which if name != "params"]
        raise ValueError(
            f"rollout: params outside their declared ranges (or not finite) {where}, as make() "
            "would refuse them; env.params_type's fields declare the ranges"
            + (f"; non-finite {', '.join(also)} followed" if also else "")
        )
    if which == ["action"] and hasattr(action_space, "n"):
        raise ValueError(
            f"rollout: the policy chose an action outside {action_space} {where}; unchecked, "
            "such an action is clipped to the nearest valid one"
        )
    raise FloatingPointError(f"rollout: non-finite {', '.join(which)} {where}")


# ------------------------------------------------------------------------------- memory
def _step_bytes(env: Env, num_envs: int) -> dict[str, int]:
    """Bytes one step of each per-step output takes for `num_envs` environments (no extras)."""
    params = env.default_params
    obs = _obs_bytes(env.observation_space(params))
    space = env.action_space(params)
    per_env = dict(
        obs=obs,
        action=int(np.prod(space.shape)) * 4,
        reward=4,
        terminated=1,
        truncated=1,
        next_obs=obs,
        episode_return=4,
        episode_length=4,
    )
    return {name: b * num_envs for name, b in per_env.items()}


def _extras_bytes(env: Env, policy, key, num_envs: int) -> int:
    """Bytes of one step of the policy's extras, from its traced output shapes."""
    if isinstance(policy, OpenLoopPolicy):
        return 0
    space = env.observation_space(env.default_params)
    obs = jax.ShapeDtypeStruct((num_envs, *space.shape), space.dtype)
    out = jax.eval_shape(lambda k, o: split_policy_output(policy(k, o))[1], key, obs)
    return sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(out))


def _available_bytes() -> int | None:
    """Memory the recorded outputs can take: the device's free memory, or the host's."""
    device = jax.devices()[0]
    stats = device.memory_stats() if device.platform != "cpu" else None
    if stats and "bytes_limit" in stats:
        return stats["bytes_limit"] - stats.get("bytes_in_use", 0)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _gb(x: float) -> str:
    return f"{x / 1e9:.3g} GB"


@functools.lru_cache(maxsize=256)
def _state_bytes(env: Env) -> int:
    """Bytes of one environment's rollout carry: its env state, observation and episode totals.

    From abstract shapes (`jax.eval_shape`): nothing of the batch's size is allocated. Once per
    environment (equal environments hash equal): tracing `init_state` on every call was most
    of a small rollout's cost (CartPole, one step: 1.3-1.9 ms a call).
    """
    params = env.default_params
    state = jax.eval_shape(env.init_state, env.reset_draw_shapes(), params)
    obs = _obs_bytes(env.observation_space(params))
    return _tree_bytes(state) + obs + 4 + 4


def _obs_bytes(space) -> int:
    """One environment's observation: float32 (4 bytes a component) or bool cells (1 byte)."""
    return int(np.prod(space.shape)) * np.dtype(space.dtype).itemsize


def _tree_bytes(tree) -> int:
    return sum(int(np.size(x)) * np.dtype(_dtype(x)).itemsize for x in jax.tree.leaves(tree))


def _dtype(x):
    dtype = getattr(x, "dtype", None)
    if dtype is not None:  # jax keeps 32-bit values unless x64 is on
        return jax.dtypes.canonicalize_dtype(dtype)
    return np.int32 if isinstance(x, int) else np.float32


def check_memory(
    env: Env, policy, key, n: int, num_envs: int, outputs, params=None, state_given=False
) -> None:
    """Refuses, before any work, a rollout whose memory would not fit in what is free.

    Counted: the batch's env state twice (a step reads one and writes the next; a `state=`
    given already lies in memory and counts once more for the one the rollout returns), the
    params (per-environment leaves are [num_envs, ...]), and the recorded outputs.
    """
    available = _available_bytes()
    if available is None:
        return
    per_step = _step_bytes(env, num_envs)

    def recorded(names) -> int:
        return n * sum(per_step.get(name, 0) for name in names)

    state = _state_bytes(env) * num_envs * (1 if state_given else 2)
    params_bytes = _tree_bytes(env.default_params if params is None else params)
    fixed = state + params_bytes

    # A policy's extras are traced only for rollouts big enough for them to matter.
    if "extras" in outputs and fixed + recorded(outputs) > available // 8:
        per_step["extras"] = _extras_bytes(env, policy, key, num_envs)
    total = fixed + recorded(outputs)
    if total <= available:
        return
    fits = [
        f"{name!r} ({_gb(recorded(names))})"
        for name, names in OUTPUT_PRESETS.items()
        if fixed + recorded(names) <= available
    ]
    most = int(available // (total / num_envs))
    raise MemoryError(
        f"rollout: n={n} steps of num_envs={num_envs} {env.id} environments need "
        f"{_gb(total)}: env state {_gb(state)}, params {_gb(params_bytes)}, and "
        f"outputs={_outputs_name(outputs)} records {_gb(recorded(outputs))}; but "
        f"{jax.devices()[0].platform} has {_gb(available)} free. What fits: "
        f"num_envs <= {most} as asked; presets that fit: {', '.join(fits) or 'none'}; or "
        "fewer steps per call, continuing with state=out.final_state"
    )


def _outputs_name(outputs) -> str:
    for name, names in OUTPUT_PRESETS.items():
        if tuple(names) == tuple(outputs):
            return repr(name)
    return repr(list(outputs))


# ------------------------------------------------------------- buffer reuse (out=)
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
