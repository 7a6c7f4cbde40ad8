"""`jaxsim.contract`: what an environment returns, against what it declares (traced only).

- `check_outputs(env)`, cheap (traced, nothing runs): what `init_state`, `dynamics` and
  `obs_fields` return against what the environment declares: the observation's shape and dtype
  against `observation_space`, a float scalar reward, a bool scalar `terminated`, a state that
  keeps its leaves' shapes and dtypes from step to step and holds the int32 `time` the library
  counts, params defaults inside their declared ranges. `jaxsim.make`, `jaxsim.rollout` and the
  Gymnasium and SB3 fronts run it once per environment class and static config, so a mismatch is
  an error before any work, never wrong numbers.
- `block_reason(env)` is the fused kernel's own question: do `init_state`, `dynamics` and
  `obs_fields`, applied to a block of environments at once, give each leaf the block's shape
  (elementwise code), as under `vmap`?

`jaxsim.check_env` runs these and then the environment itself. Every message names the method,
the field, what it returned and what was declared.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim import params as params_lib
from jaxsim.spaces import Box, Discrete


class EnvCheckError(ValueError):
    """An environment does not do what it declares; `problems` lists each finding."""

    def __init__(self, env_id: str, problems: list[str]):
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{env_id}: {len(self.problems)} problem(s) found by check_env:\n{lines}")


# ------------------------------------------------------------------------------ the cheap check
_CHECKED: dict = {}  # (class, static config) -> None once checked (a failure raises every time)


def check_outputs(env) -> None:
    """Raises `EnvCheckError` unless what `env` returns matches what it declares (traced only).

    Checked once per (class, static config); cheap: nothing is compiled or run."""
    cache_key = (type(env), env._config_overrides)
    if cache_key in _CHECKED:
        return
    problems = output_problems(env)
    if problems:
        raise EnvCheckError(env.id, problems)
    _CHECKED[cache_key] = None


def _describe(x) -> str:
    if isinstance(x, bool | int | float):
        return f"a Python {type(x).__name__}"
    return f"{np.dtype(x.dtype).name}{list(x.shape)}"


def _is_array(x) -> bool:
    return isinstance(x, jax.ShapeDtypeStruct | jax.Array | np.ndarray)


def step_extra(env):
    """The fourth argument `dynamics` takes, as a shape (None: it takes none)."""
    if env.draws.step_key:
        return jax.ShapeDtypeStruct((2,), jnp.uint32)
    shapes = env.step_uniform_shapes()
    return tuple(jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes) if shapes else None


def _dynamics(env, state, action, params, extra):
    """`dynamics` with its fourth argument where it takes one (`step_extra`)."""
    if extra is None:
        return env.dynamics(state, action, params)
    return env.dynamics(state, action, params, extra)


def output_problems(env) -> list[str]:
    """Every mismatch between what `env` returns and what it declares (traced, nothing runs)."""
    name, params = env.id, env.default_params
    problems = _params_problems(env)
    try:
        obs_space, act_space = env.observation_space(params), env.action_space(params)
    except Exception as err:
        return [*problems, f"{name}: observation_space/action_space(params) raised {err!r}"]
    for what, space in (("observation_space", obs_space), ("action_space", act_space)):
        if not isinstance(space, Box | Discrete):
            problems.append(f"{what}(params) returned {space!r}; declare a jaxsim.Box or Discrete")
    if problems:
        return problems
    try:
        state = jax.eval_shape(env.init_state, env.reset_draw_shapes(), params)
    except Exception as err:
        return [f"init_state(draws, params) fails to trace: {type(err).__name__}: {err}"]
    time = getattr(state, "time", None)
    if time is None or not hasattr(state, "replace"):
        return [
            f"init_state returned a {type(state).__name__} without a `time` field; the state is a "
            "flax.struct.dataclass holding `time: jax.Array` (int32, the steps the library counts)"
        ]
    if not _is_array(time) or time.shape != () or time.dtype != jnp.int32:
        problems.append(f"init_state: state.time is {_describe(time)}; declared int32[] (a count)")
    problems += _obs_problems(env, "init_state", state, params, obs_space)
    action = jax.ShapeDtypeStruct(act_space.shape, act_space.dtype)
    try:
        raw = {}  # what dynamics returned while traced: tracers, or Python numbers

        def traced(*args):
            out = _dynamics(env, *args)
            if isinstance(out, tuple) and len(out) == 3:
                raw["terminated"] = out[2]
            return out

        out = jax.eval_shape(traced, state, action, params, step_extra(env))
    except Exception as err:
        return [*problems, f"dynamics(state, action, params) fails to trace: {err}"]
    if not isinstance(out, tuple) or len(out) != 3:
        return [*problems, "dynamics must return (state, reward, terminated)"]
    next_state, reward, terminated = out
    if isinstance(raw.get("terminated"), bool | int | float):
        terminated = raw["terminated"]  # a Python value: named as one
    if (
        reward is None
        or (_is_array(reward) and reward.shape != ())
        or not (
            isinstance(reward, int | float)
            or (_is_array(reward) and jnp.issubdtype(reward.dtype, jnp.floating))
        )
    ):
        problems.append(
            f"dynamics: reward is {_describe(reward)}; declared a float scalar (float32[])"
        )
    if not _is_array(terminated) or terminated.shape != () or terminated.dtype != jnp.bool_:
        problems.append(
            f"dynamics: terminated is {_describe(terminated)}; declared a bool scalar (bool[]), "
            "e.g. a comparison, or jnp.zeros_like(state.time, bool) for a task that never ends"
        )
    problems += _state_problems(state, next_state)
    if not problems:
        problems += _obs_problems(env, "dynamics", next_state, params, obs_space)
    return problems


def _params_problems(env) -> list[str]:
    problems = []
    shapes = env.param_shapes()
    for spec in params_lib.specs(env.params_type):
        value = getattr(env.default_params, spec.name)
        try:
            spec.check(env.id, np.asarray(value), shapes[spec.name])
        except (TypeError, ValueError) as err:
            problems.append(f"default_params: {err}")
    return problems


def _state_problems(state, next_state) -> list[str]:
    before = dict(jax.tree.leaves_with_path(state))
    if jax.tree.structure(state) != jax.tree.structure(next_state):
        return [
            f"dynamics: returns a state of structure {jax.tree.structure(next_state)}, where "
            f"init_state's is {jax.tree.structure(state)}"
        ]
    problems = []
    for path, leaf in jax.tree.leaves_with_path(next_state):
        old = before[path]
        if not _is_array(leaf) or leaf.shape != old.shape or leaf.dtype != old.dtype:
            problems.append(
                f"dynamics: state{jax.tree_util.keystr(path)} becomes {_describe(leaf)}; "
                f"init_state made it {_describe(old)} (a state keeps its shapes and dtypes)"
            )
    return problems


def _obs_problems(env, method, state, params, space) -> list[str]:
    try:
        comps = jax.eval_shape(env.obs_components, state, params)
        obs = jax.eval_shape(env.observe, state, params)
    except Exception as err:
        return [f"obs_fields(state, params) after {method} fails to trace: {err}"]
    if not env.array_obs and env.obs_shape is None:
        bad = [i for i, c in enumerate(comps) if _is_array(c) and c.shape != ()]
        if bad:
            got = [_describe(comps[i]) for i in bad]
            return [
                f"obs_fields: components {bad} are not scalars ({got}); return one array (the "
                "whole observation) or a tuple of scalars"
            ]
    problems = []
    if tuple(obs.shape) != tuple(space.shape):
        problems.append(
            f"obs_fields (after {method}): the observation has shape {tuple(obs.shape)}, but "
            f"observation_space declares {tuple(space.shape)}"
        )
    if isinstance(space, Box) and np.dtype(obs.dtype) != np.dtype(space.dtype):
        problems.append(
            f"obs_fields (after {method}): the observation is {np.dtype(obs.dtype).name}, but "
            f"observation_space declares {np.dtype(space.dtype).name} (set obs_dtype)"
        )
    return problems


# --------------------------------------------------------------------- the kernel's own question
def block_reason(env, width: int = 2) -> str | None:
    """Why `env`'s functions cannot run on a block of `width` environments at once (the fused
    kernel's way: no vmap), or None: applied to a block, each gives every leaf the block's
    shape and the dtype it has under vmap. Traced only."""
    params = env.default_params
    name = type(env).__name__

    def lanes(s):
        return jax.ShapeDtypeStruct((width, *s.shape), s.dtype)

    draw = jax.tree.map(lanes, env.reset_draw_shapes())
    space = env.action_space(params)
    action = lanes(jax.ShapeDtypeStruct(space.shape, space.dtype))
    extra = step_extra(env)
    extra = None if extra is None else jax.tree.map(lanes, extra)

    def compare(method, fn, *args, constants=False):
        """`fn(*args)` on the block against `fn` vmapped over it, in shapes; with `constants`,
        a leaf of one environment's shape (a fixed start) passes: the kernel broadcasts it."""
        try:
            direct = jax.eval_shape(fn, *args)
        except Exception as err:
            return (
                f"{name}.{method} fails on a block of {width} environments ({type(err).__name__}: "
                f"{str(err).splitlines()[0][:200]}): the kernel needs elementwise jnp code"
            )
        mapped = jax.eval_shape(jax.vmap(fn, axis_size=width), *args)
        for (path, want), got in zip(
            jax.tree.leaves_with_path(mapped), jax.tree.leaves(direct), strict=False
        ):
            got_shape = tuple(np.shape(got))
            if constants and got_shape == tuple(want.shape[1:]):
                continue
            if got_shape != tuple(want.shape):
                kind = "a Python scalar" if not _is_array(got) else f"shape {got_shape}"
                return (
                    f"{name}.{method}: on a block of {width} environments, its output"
                    f"{jax.tree_util.keystr(path)} is {kind}, where one per environment "
                    f"gives {tuple(want.shape)}: the kernel needs elementwise jnp code (constants "
                    "made from the state's arrays, e.g. jnp.zeros_like(state.time), no indexing "
                    "into the batch, no Python numbers as state leaves)"
                )
        return None

    state = jax.tree.map(lanes, env.state_template())
    return (
        compare("init_state", lambda u: env.init_state(u, params), draw, constants=True)
        or compare(
            "dynamics", lambda s, a, e: _dynamics(env, s, a, params, e)[0], state, action, extra
        )
        or compare("obs_fields", lambda s: env.obs_components(s, params), state)
    )
