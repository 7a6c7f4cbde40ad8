"""Params and static config: validation, per-environment and per-episode params, recompiles."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

import jaxsim
from jaxsim import rng
from jaxsim.params import field
from jaxsim.rollout.trajectory import EpisodeSums

KEY = jax.random.key(3)
FUSED = dict(backend="fused", fused_config=jaxsim.FusedConfig(block_envs=4, steps_per_launch=3))
BACKENDS = {"scan": dict(backend="scan"), "fused": FUSED}


def assert_trees_equal(a, b, rtol=0.0):
    """Ints and flags bitwise; floats within `rtol` (0: bitwise)."""
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for (path, x), y in zip(jax.tree.leaves_with_path(a), jax.tree.leaves(b), strict=True):
        x, y = np.asarray(x), np.asarray(y)
        name = jax.tree_util.keystr(path)
        if np.issubdtype(x.dtype, np.floating) and rtol:
            np.testing.assert_allclose(y, x, rtol=rtol, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(y, x, err_msg=name)


# ------------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(max_episode_steps=0), ValueError, r"max_episode_steps.*must be an integer >= 1.*0"),
        (dict(max_episode_steps=-5), ValueError, r"max_episode_steps.*>= 1.*got -5"),
        (dict(max_episode_steps=2.5), TypeError, r"max_episode_steps must be an integer.*2.5"),
        (dict(max_episode_steps=True), TypeError, r"max_episode_steps must be an integer"),
        (dict(gravity="x"), TypeError, r"gravity must be a float, got 'x' \(str\)"),
        (dict(gravity=float("nan")), ValueError, r"gravity must be a finite float, got nan"),
        (dict(masspole=-0.1), ValueError, r"masspole must be a float > 0.0, got -0.1"),
        (dict(tau=0), ValueError, r"tau \(seconds between.*\) must be a float > 0.0"),
    ],
)
def test_make_validates_types_and_ranges(kwargs, error, match):
    with pytest.raises(error, match=match):
        jaxsim.make("CartPole-v1", **kwargs)


def test_make_converts_ints_for_float_fields_and_accepts_numpy_scalars():
    env = jaxsim.make("CartPole-v1", gravity=10, max_episode_steps=np.int64(7))
    params = env.default_params
    assert params.gravity == 10.0 and isinstance(params.gravity, float)
    assert params.max_episode_steps == 7 and isinstance(params.max_episode_steps, int)
    assert jaxsim.make(env.id, **env.make_kwargs()) == env


# ----------------------------------------------------------------- an env with static config
@struct.dataclass
class ChainParams:
    weights: float = field(1.0, shape=("links",), doc="reward per link")
    speed: float = field(0.5, gt=0.0)
    max_episode_steps: int = field(6, ge=1)


@struct.dataclass
class ChainConfig:
    links: int = field(4, ge=1, power_of_two=True)


@struct.dataclass
class ChainState:
    position: jax.Array
    time: jax.Array


class Chain(jaxsim.Env):
    """A toy with an array-valued param whose length is static config; elementwise physics."""

    id = "Chain-v0"
    params_type = ChainParams
    config_type = ChainConfig
    state_type = ChainState
    draws = jaxsim.Draws(reset=1)

    def init_state(self, u, params):
        return ChainState(u[0], jnp.zeros(jnp.shape(u[0]), jnp.int32))

    def dynamics(self, state, action, params):
        position = state.position + params.speed * (action.astype(jnp.float32) - 0.5)
        reward = position * jnp.sum(params.weights, axis=-1)
        return state.replace(position=position), reward, position > 2.0

    def obs_fields(self, state, params):
        return (state.position,)

    def observation_space(self, params):
        return jaxsim.Box(-np.inf, np.inf, (1,))

    def action_space(self, params):
        return jaxsim.Discrete(2)


def test_static_config_is_validated_and_part_of_the_identity():
    small, big = Chain(links=2), Chain(links=8)
    assert small.config.links == 2 and Chain().config.links == 4
    assert small != big and hash(small) != hash(big) and small == Chain(links=2)
    assert small.default_params.weights.shape == (2,)
    assert big.param_shapes()["weights"] == (8,)
    with pytest.raises(ValueError, match=r"links must be an integer power of two >= 1, got 3"):
        Chain(links=3)
    with pytest.raises(TypeError, match=r"unknown argument.*static config is \['links'\]"):
        Chain(link=2)
    with pytest.raises(ValueError, match=r"weights must have shape \(2,\).*got shape \(3,\)"):
        Chain(links=2, weights=[1.0, 2.0, 3.0])
    assert Chain(links=2, weights=[1.0, 3.0]).default_params.weights.tolist() == [1.0, 3.0]


def test_static_config_recompiles_and_params_do_not():
    @chex.assert_max_traces(n=2)  # the rollout is traced (and compiled) at most twice
    def policy(key, obs):
        return jax.random.randint(key, obs.shape[:1], 0, 2, jnp.int32)

    env = Chain(links=4)

    def run(env, params):
        return jaxsim.rollout(env, policy, 5, num_envs=4, params=params, backend="scan")

    run(env, env.default_params)
    other = env.default_params.replace(speed=0.25, weights=np.full((4,), 2.0, np.float32))
    run(env, other)  # new params values: no new trace
    per_env = other.replace(speed=jnp.linspace(0.1, 0.4, 4))
    run(env, per_env)  # a new per-environment layout is a new program, once
    run(env, per_env.replace(speed=per_env.speed * 2))
    run(Chain(links=4), per_env)  # an equal environment is the same program
    with pytest.raises(AssertionError, match="traced > 2 times"):
        run(Chain(links=8), Chain(links=8).default_params)  # new static config: a new program


@pytest.mark.parametrize("backend", BACKENDS)
def test_array_valued_params_are_unambiguous_when_their_length_equals_num_envs(backend):
    env = Chain(links=4)
    shared = env.default_params.replace(weights=np.asarray([1.0, 2.0, 3.0, 4.0], np.float32))
    per_env = shared.replace(weights=jnp.arange(16, dtype=jnp.float32).reshape(4, 4))
    kw = dict(num_envs=4, key=KEY, **BACKENDS[backend])
    a = jaxsim.rollout(env, "random", 7, params=shared, **kw)
    b = jaxsim.rollout(env, "random", 7, params=per_env, **kw)
    # Same physics; rewards scale with each environment's sum of weights.
    np.testing.assert_array_equal(a.next_obs, b.next_obs)
    ratio = np.asarray(per_env.weights.sum(1) / shared.weights.sum())
    np.testing.assert_allclose(b.reward, a.reward * ratio, rtol=1e-5)
    with pytest.raises(ValueError, match=r"field 'weights' has shape \(4, 3\).*\(4,\).*\(4, 4\)"):
        jaxsim.rollout(env, "random", 2, params=shared.replace(weights=jnp.ones((4, 3))), **kw)


# ------------------------------------------------------------------- per-environment params
def _cartpole_per_env(num_envs):
    env = jaxsim.make("CartPole-v1", theta_threshold_radians=0.05)  # some episodes terminate
    params = env.default_params.replace(
        masspole=jnp.linspace(0.05, 0.5, num_envs),
        max_episode_steps=jnp.arange(num_envs, dtype=jnp.int32) % 4 + 5,
    )  # length stays shared
    return env, params


PER_ENV_N, PER_ENV_NUM_ENVS = 19, 6
_PER_ENV = {}


def _per_env_rollout(backend):
    """(env, params, policy, kw, trajectory): CartPole with per-environment params under an MLP
    on `backend`, run once and shared by the per-environment tests below."""
    if backend not in _PER_ENV:
        env, params = _cartpole_per_env(PER_ENV_NUM_ENVS)
        policy = jaxsim.init_mlp_policy(jax.random.key(0), env, hidden=(8,))
        kw = dict(num_envs=PER_ENV_NUM_ENVS, key=KEY, **BACKENDS[backend])
        traj = jaxsim.rollout(env, policy, PER_ENV_N, params=params, **kw)
        _PER_ENV[backend] = env, params, policy, kw, traj
    return _PER_ENV[backend]


@pytest.mark.parametrize("backend", BACKENDS)
def test_environment_i_equals_a_rollout_with_its_params_shared(backend):
    env, params, policy, kw, batched = _per_env_rollout(backend)
    n = PER_ENV_N
    assert batched.truncated.any() and batched.terminated.any()
    batched = batched.replace(final_state=None)
    for i in (0, 3, 5):
        shared = jax.tree.map(lambda x, i=i: x[i] if jnp.ndim(x) else x, params)
        alone = jaxsim.rollout(env, policy, n, params=shared, **kw).replace(final_state=None)
        column = lambda x, i=i: x[:, i]  # noqa: E731
        assert_trees_equal(jax.tree.map(column, batched), jax.tree.map(column, alone))


def test_per_env_params_are_equal_on_both_backends():
    """The previous test's rollouts (6 environments in blocks of 4: padded), scan against fused."""
    scan, fused = _per_env_rollout("scan")[-1], _per_env_rollout("fused")[-1]
    assert_trees_equal(scan, fused, rtol=1e-5)


def test_wrong_leading_size_is_named():
    env = jaxsim.make("CartPole-v1")
    bad = env.default_params.replace(gravity=jnp.ones(5))
    match = r"params of CartPole-v1: field 'gravity' has shape \(5,\)"
    with pytest.raises(ValueError, match=match):
        jaxsim.rollout(env, "random", 3, num_envs=4, params=bad)


# ---------------------------------------------------------------------- per-episode params
def test_uniform_params_draws_per_environment_in_range():
    env = jaxsim.make("CartPole-v1")
    dr = jaxsim.uniform_params(env, masspole=(0.05, 0.5), max_episode_steps=(10, 12))
    params = dr.sample(KEY, 2000, env.default_params)
    assert params.masspole.shape == (2000,) and params.max_episode_steps.dtype == jnp.int32
    assert 0.05 <= float(params.masspole.min()) and float(params.masspole.max()) < 0.5
    assert abs(float(params.masspole.mean()) - 0.275) < 0.01
    counts = np.bincount(np.asarray(params.max_episode_steps))[10:]
    assert counts.tolist() and len(counts) == 3 and counts.min() > 600
    assert params.gravity == env.default_params.gravity  # fields not named stay shared


@pytest.mark.parametrize(
    ("ranges", "match"),
    [
        (dict(gravty=(1.0, 2.0)), r"unknown params field 'gravty'"),
        (dict(masspole=(0.5, 0.1)), r"masspole needs low <= high"),
        (dict(masspole=(-1.0, 0.1)), r"masspole must be a float > 0.0, got -1.0"),
        (dict(masspole=0.1), r"masspole needs a \(low, high\) pair"),
        (dict(), r"name at least one field"),
    ],
)
def test_uniform_params_rejects_bad_ranges(ranges, match):
    with pytest.raises(ValueError, match=match):
        jaxsim.uniform_params(jaxsim.make("CartPole-v1"), **ranges)


def _episode_lengths(env_index, draw, seed, n):
    """Lengths of env `env_index`'s episodes when each draws max_episode_steps at its start."""
    lengths, counter = [], 0
    while counter < n:
        length = int(draw(seed, jnp.uint32(env_index), jnp.uint32(counter))["max_episode_steps"])
        lengths.append(length)
        counter += length
    return lengths


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_episode_draws_its_own_params_at_reset(backend):
    env = jaxsim.make("Pendulum-v1")  # never terminates: episodes end at their time limit
    dr = jaxsim.uniform_params(env, max_episode_steps=(2, 7), g=(5.0, 15.0))
    num_envs, n = 5, 40
    out = jaxsim.rollout(
        env, "random", n, num_envs=num_envs, key=KEY, params_sampler=dr, **BACKENDS[backend]
    )
    seed = rng.seed_from_key(jax.random.split(KEY, 3)[0])
    done = np.asarray(out.done)
    lengths = np.asarray(out.episode_length)
    draw = jax.jit(dr.draw)  # called once per episode below: one compile, not one per operation
    for i in range(num_envs):
        expected = _episode_lengths(i, draw, seed, n)
        got = lengths[done[:, i], i].tolist()
        assert got == expected[: len(got)] and len(got) >= len(expected) - 1
    assert len(set(lengths[done].tolist())) > 2  # lengths really vary between episodes
    # The episode in progress keeps the values drawn at its start.
    last_start = n - np.asarray(out.final_state.episode_length)
    g = [float(draw(seed, jnp.uint32(i), jnp.uint32(c))["g"]) for i, c in enumerate(last_start)]
    np.testing.assert_allclose(out.final_state.episode_params["g"], g, rtol=1e-6)


def test_per_episode_params_equal_on_both_backends_and_continue_across_rollouts():
    env = jaxsim.make("CartPole-v1")
    dr = jaxsim.uniform_params(env, masspole=(0.05, 0.5), max_episode_steps=(4, 9))
    kw = dict(num_envs=6, key=KEY, params_sampler=dr)
    scan = jaxsim.rollout(env, "random", 15, backend="scan", **kw)
    fused = jaxsim.rollout(env, "random", 15, **FUSED, **kw)
    assert_trees_equal(scan, fused, rtol=1e-5)
    more = jaxsim.rollout(env, "random", 5, state=scan.final_state, key=KEY, params_sampler=dr)
    assert more.obs.shape[1] == 6
    with pytest.raises(ValueError, match=r"continue a rollout with the params_sampler"):
        jaxsim.rollout(env, "random", 5, state=scan.final_state)


def test_a_sampler_of_another_env_or_shape_is_rejected():
    env = jaxsim.make("CartPole-v1")
    dr = jaxsim.uniform_params(jaxsim.make("Pendulum-v1"), g=(5.0, 15.0))
    with pytest.raises(ValueError, match=r"draws \['g'\], which are not params of CartPole-v1"):
        jaxsim.rollout(env, "random", 3, num_envs=2, params_sampler=dr)
    with pytest.raises(TypeError, match=r"params_sampler must have `fields`"):
        jaxsim.rollout(env, "random", 3, num_envs=2, params_sampler=lambda *a: {})


# ------------------------------------------------------------------------ episode statistics
def test_streaming_statistics_match_float64_on_large_returns():
    """Welford + Chan stay exact where E[x^2] - mean^2 in float32 loses every digit."""
    rs = np.random.default_rng(0)
    num_envs, steps = 16, 300
    done = rs.random((steps, num_envs)) < 0.3
    returns = (1e4 + rs.normal(0, 0.5, (steps, num_envs))).astype(np.float32)
    lengths = rs.integers(1, 100, (steps, num_envs)).astype(np.int32)
    sums = EpisodeSums.zeros(num_envs)
    for t in range(steps):
        sums = sums.add(jnp.asarray(done[t]), jnp.asarray(returns[t]), jnp.asarray(lengths[t]))
    stats = sums.stats()
    finished = returns[done].astype(np.float64)
    assert int(stats.count) == done.sum()
    np.testing.assert_allclose(stats.mean_return, finished.mean(), rtol=1e-6)
    np.testing.assert_allclose(stats.std_return, finished.std(), rtol=2e-3)
    np.testing.assert_allclose(stats.mean_length, lengths[done].mean(), rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_stats_output_matches_a_host_computation(backend):
    env = jaxsim.make("CartPole-v1", max_episode_steps=12)
    kw = dict(num_envs=9, key=KEY, **BACKENDS[backend])
    full = jaxsim.rollout(env, "random", 40, **kw)
    returns, lengths = full.finished_episodes()
    for stats in (jaxsim.rollout(env, "random", 40, outputs="stats", **kw).stats,
                  full.episode_stats()):  # fmt: skip
        assert int(stats.count) == len(returns) > 20
        np.testing.assert_allclose(stats.mean_return, returns.mean(), rtol=1e-5)
        np.testing.assert_allclose(stats.std_return, returns.std(), rtol=1e-4)
        np.testing.assert_allclose(stats.mean_length, lengths.mean(), rtol=1e-5)


# --------------------------------------------------------------------------- lazy auto-reset
def test_a_vmapped_rollout_equals_separate_rollouts():
    """Under vmap the reset's lax.cond becomes a select: the result must not change."""
    env = jaxsim.make("Acrobot-v1", max_episode_steps=5)
    keys = jax.random.split(KEY, 3)

    def run(key):
        return jaxsim.rollout(env, "random", 12, num_envs=4, key=key, backend="scan")

    batched = jax.jit(jax.vmap(run))(keys)
    for j, key in enumerate(keys):
        assert_trees_equal(jax.tree.map(lambda x, j=j: x[j], batched), run(key), rtol=1e-6)


def test_synchronised_episodes_reset_on_the_right_step():
    """Every environment truncates at once: the batch-level reset runs only on those steps."""
    env = jaxsim.make("Pendulum-v1", max_episode_steps=4)
    out = jaxsim.rollout(env, "random", 12, num_envs=3, key=KEY)
    done = np.asarray(out.done)
    assert done[3::4].all() and not np.delete(done, np.s_[3::4], axis=0).any()
    seed = rng.seed_from_key(jax.random.split(KEY, 3)[0])
    reset_at = jax.jit(env.reset_at)
    for t in (4, 8):
        for i in range(3):
            _, obs = reset_at(seed, jnp.uint32(i), jnp.uint32(t), env.default_params)
            np.testing.assert_allclose(out.obs[t, i], obs, rtol=1e-6, atol=1e-6)
