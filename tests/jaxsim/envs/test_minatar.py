"""Native MinAtar: step-exact parity with the original `minatar` package; the fused backend."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim
from benchmarks.gpu.lowering import TRITON_CALL, lower_for_cuda
from jaxsim.envs.minatar import ENVS
from jaxsim.envs.minatar.base import CELL, cubehelix_palette
from jaxsim.fused import FusedConfig

minatar = pytest.importorskip("minatar")

KEY = jax.random.key(0)
MINE = {cls.id: cls for cls in ENVS}  # this module's games (other modules test theirs)


class RecordingRandom:
    """Stands in for the original's `np.random.RandomState` and logs every draw as the uniform
    in [0, 1) that jaxsim turns into the same outcome: a `rand()` value itself (drawn on a 2**-24
    grid, exact in float32, so `u < p` compares alike on both sides), a `randint` value v of n
    as (v + 0.5) / n (the centre of the interval whose floor(u * n) is v)."""

    def __init__(self, seed: int):
        self.rs = np.random.RandomState(seed)
        self.log: list[float] = []

    def rand(self, *size):
        k = self.rs.randint(0, 2**24, size=size or None)
        k = np.where(k == 2**23, k + 1, k)  # never exactly 0.5: the original's sign(0) breaks it
        u = np.asarray(k, np.float64) / 2**24
        self.log += np.atleast_1d(u).tolist()
        return u if size else float(u)

    def randint(self, low, high=None, size=None):
        if high is None:
            low, high = 0, low
        v = self.rs.randint(low, high, size=size)
        self.log += ((np.atleast_1d(v) - low + 0.5) / (high - low)).tolist()
        return v

    def take(self, count: int) -> list[float]:
        """This call's draws, padded (with draws jaxsim leaves unused) to `count`."""
        out, self.log = self.log, []
        assert len(out) <= count, f"the original drew {len(out)} numbers, jaxsim takes {count}"
        return out + [0.5] * (count - len(out))


def record_original(env, steps, seed, max_len, up_bias=0.0, first_len=None, ramping=True):
    """Plays the original with random actions; returns what jaxsim is to replay and match.

    Episodes end at termination or after `max_len` steps (`first_len` for the first), then both
    sides simply start anew. Each episode starts with last_action 0, as jaxsim's does.
    """
    game = minatar.Environment(env.game, sticky_action_prob=0.1, difficulty_ramping=ramping)
    rec = RecordingRandom(seed)
    game.random = game.env.random = rec
    actions_rng = np.random.default_rng(seed)
    n_actions = env.action_space(env.default_params).n
    action_set = env.minimal_actions if env.config.minimal_action_set else tuple(range(6))
    cols = {k: [] for k in ("start", "reset_u", "action", "step_u", "obs", "reward", "term")}
    first_obs = []
    t = 0
    while t < steps:
        game.reset()
        game.last_action = 0
        reset_u = rec.take(len(env.reset_uniform_shapes()))
        first_obs.append(game.state())  # bool [10, 10, C], as jaxsim's
        for i in range(max_len if len(first_obs) > 1 or first_len is None else first_len):
            if actions_rng.random() < up_bias:
                a = action_set.index(2)  # up (Freeway: the chicken crosses now and then)
            else:
                a = int(actions_rng.integers(n_actions))
            reward, term = game.act(action_set[a])
            cols["start"].append(i == 0)
            cols["reset_u"].append(reset_u)
            cols["action"].append(a)
            cols["step_u"].append(rec.take(len(env.step_uniform_shapes())))
            cols["obs"].append(game.state())
            cols["reward"].append(reward)
            cols["term"].append(term)
            t += 1
            if term:
                break
    out = {k: np.asarray(v) for k, v in cols.items()}
    return out, np.stack(first_obs)


@functools.partial(jax.jit, static_argnums=0)
def replay(env, params, start, reset_u, action, step_u):
    """jaxsim through the recorded draws: (first obs of each step's episode, next obs, reward,
    terminal) per step, each episode started by `init_state` from its reset draws."""
    # axis_size: a fixed start draws nothing (reset_u is empty).
    init = jax.vmap(env.init_state, in_axes=(0, None), axis_size=len(start))(reset_u, params)
    state0 = jax.tree.map(lambda x: x[0], init)

    def body(state, xs):
        start, fresh, a, u = xs
        state = jax.tree.map(lambda f, s: jnp.where(start, f, s), fresh, state)
        first = env.observe(state, params)
        state, reward, term = env.dynamics(state, a, params, u)
        return state, (first, env.observe(state, params), reward, term)

    xs = (start, init, action, step_u)
    return jax.lax.scan(body, state0, xs)[1]


def _split(u: np.ndarray) -> tuple:
    """[T, k] -> k float32 arrays [T] (every MinAtar uniform here is a scalar)."""
    return tuple(jnp.asarray(u[:, i], jnp.float32) for i in range(u.shape[1]))


# (id, steps, longest episode, how often the policy picks "up", difficulty ramping).
# Freeway-v0's first episode runs to the game's own time limit; the others are cut so that many
# episodes start.
CASES = [
    ("MinAtar/Breakout-v0", 10_000, 1000, 0.0, True),
    ("MinAtar/Asterix-v0", 10_000, 1000, 0.0, True),
    ("MinAtar/Freeway-v0", 10_000, 700, 0.6, True),
    ("MinAtar/Breakout-v1", 1_500, 1000, 0.0, True),
    ("MinAtar/Asterix-v1", 1_500, 1000, 0.0, True),
    ("MinAtar/Freeway-v1", 1_500, 300, 0.6, True),
    ("MinAtar/Asterix-v0", 3_000, 1000, 0.0, False),
]


@pytest.mark.parametrize(("env_id", "steps", "max_len", "up_bias", "ramping"), CASES)
def test_step_exact_parity_with_the_original(env_id, steps, max_len, up_bias, ramping):
    """Sticky actions 0.1 (and ramping on, but for one case); the original's draws replayed
    into jaxsim: 0 mismatches in observation, reward and termination."""
    env = jaxsim.make(env_id, difficulty_ramping=ramping)
    params = env.default_params
    first_len = 10**9 if env_id == "MinAtar/Freeway-v0" else None
    rec, first_obs = record_original(env, steps, len(env_id), max_len, up_bias, first_len, ramping)
    out = replay(
        env, params, jnp.asarray(rec["start"]), _split(rec["reset_u"]),
        jnp.asarray(rec["action"], jnp.int32), _split(rec["step_u"]),
    )  # fmt: skip
    first, obs, reward, term = (np.asarray(x) for x in out)
    starts = np.flatnonzero(rec["start"])
    assert len(starts) >= 4 and rec["reward"].sum() > 0  # many episodes, some rewarded
    assert first.dtype == obs.dtype == first_obs.dtype == rec["obs"].dtype == np.bool_
    np.testing.assert_array_equal(first[starts], first_obs, err_msg="reset observations")
    for name, mine, theirs in (("obs", obs, rec["obs"]), ("reward", reward, rec["reward"])):
        bad = np.flatnonzero((mine != theirs).reshape(len(mine), -1).any(axis=1))
        assert bad.size == 0, f"{name} differs at {bad.size} steps, first at step {bad[:1]}"
    np.testing.assert_array_equal(term, rec["term"], err_msg="terminations")
    if env_id == "MinAtar/Freeway-v0":
        assert np.flatnonzero(rec["term"])[0] == 2500  # the 2501st step ends the first episode
    if env_id == "MinAtar/Asterix-v0" and ramping:  # both kinds of speed-up (steps 102, 203)
        assert np.diff(np.append(starts, len(rec["start"]))).max() > 203


def _original_episodes(game: str, episodes: int, seed: int):
    env = minatar.Environment(game)
    env.seed(seed)
    rng = np.random.default_rng(seed)
    returns, lengths = [], []
    for _ in range(episodes):
        env.reset()
        total, length, term = 0.0, 0, False
        while not term:
            reward, term = env.act(int(rng.integers(6)))
            total, length = total + reward, length + 1
        returns.append(total)
        lengths.append(length)
    return np.mean(returns), np.mean(lengths)


@pytest.mark.parametrize("env_id", ["MinAtar/Breakout-v0", "MinAtar/Asterix-v0"])
def test_random_policy_return_and_length_match_the_original(env_id):
    """Loose: jaxsim's own counter-based draws against the original's RandomState."""
    env = jaxsim.make(env_id)
    out = jaxsim.rollout(env, "random", 250, num_envs=64, key=KEY, outputs="stats")
    mine = float(out.stats.mean_return), float(out.stats.mean_length)
    theirs = _original_episodes(env.game, 250, seed=1)
    assert int(out.stats.count) > 150
    np.testing.assert_allclose(mine, theirs, rtol=0.15)


def test_freeway_random_policy_scores_as_the_original():
    """Freeway's episodes are 2501 steps: a few of the original's against 8 of jaxsim's."""
    env = jaxsim.make("MinAtar/Freeway-v0")
    out = jaxsim.rollout(env, "random", 2501, num_envs=8, key=KEY, outputs="stats")
    assert int(out.stats.count) == 8 and float(out.stats.mean_length) == 2501
    theirs, length = _original_episodes("freeway", 3, seed=1)
    assert length == 2501
    np.testing.assert_allclose(float(out.stats.mean_return), theirs, atol=1.5)


# ------------------------------------------------------------------------------------ the kernel
# Overrides that make every path happen in a few steps: truncation and auto-reset, spawns,
# Freeway's own end, the sticky repeat (half the steps). Breakout's actions come from an MLP,
# which inside the kernel reads the grid's cells unpacked from the words.
FUSED = {
    "MinAtar/Breakout-v1": dict(max_episode_steps=9, sticky_action_prob=0.5),
    "MinAtar/Asterix-v0": dict(max_episode_steps=12, init_spawn_speed=1, sticky_action_prob=0.5),
    "MinAtar/Freeway-v1": dict(time_limit=6, player_speed=0, sticky_action_prob=0.5),
}


@pytest.mark.slow
@pytest.mark.parametrize("env_id", list(FUSED))
def test_scan_and_fused_give_the_same_trajectory_bit_for_bit(env_id):
    """The kernel in interpret mode draws the same step uniforms as the scan, and its packed
    words unpack into the same [n, num_envs, 10, 10, C] observations: bool cells, as the scan's,
    in the declared space (Breakout's next_obs too: test_minatar_obs_dtype.py's bool check)."""
    env = jaxsim.make(env_id, **FUSED[env_id])
    policy = "random"
    if "Breakout" in env_id:
        policy = jaxsim.init_mlp_policy(jax.random.key(1), env, hidden=(16, 16))
    # One launch (one kernel to compile); every output but next_obs (obs's columns again),
    # which Breakout's kernel also writes.
    cfg = FusedConfig(block_envs=8, steps_per_launch=16, interpret=True)
    outputs = ("obs", "action", "reward", "terminated", "truncated", "episode_return")
    if "Breakout" in env_id:
        outputs += ("next_obs",)
    kw = dict(num_envs=12, key=KEY, outputs=outputs)
    scan = jaxsim.rollout(env, policy, 16, backend="scan", **kw)
    fused = jaxsim.rollout(env, policy, 16, backend="fused", fused_config=cfg, **kw)
    assert scan.obs.shape == (16, 12, *env.obs_shape)
    assert bool(scan.terminated.any()) and bool(scan.truncated.any() or "Freeway" in env_id)
    for name in ("obs", "next_obs") if "Breakout" in env_id else ("obs",):
        assert getattr(fused, name).dtype == getattr(scan, name).dtype == jnp.bool_
    assert bool(env.observation_space(env.default_params).contains(fused.obs[0, 0]))
    for (path, x), y in zip(jax.tree.leaves_with_path(scan), jax.tree.leaves(fused), strict=True):
        np.testing.assert_array_equal(np.asarray(y), np.asarray(x), err_msg=str(path))


@pytest.mark.parametrize(
    "env_id", ["MinAtar/Asterix-v0", "MinAtar/Breakout-v0", "MinAtar/Freeway-v0"]
)
def test_kernel_lowers_for_triton_on_cuda(env_id):
    """Lowers (without compiling) for CUDA from the CPU, as test_fused.py's check does."""
    env = jaxsim.make(env_id)
    cfg = FusedConfig(block_envs=128, steps_per_launch=8, interpret=False)

    def run(key):
        return jaxsim.rollout(
            env, "random", 8, num_envs=256, key=key, backend="fused", fused_config=cfg
        )

    assert TRITON_CALL in lower_for_cuda(run, KEY).as_text()


# ------------------------------------------------------------------------- ids, fronts, errors
def test_ids_follow_the_original_gymnasium_ids():
    for game in ("Asterix", "Breakout", "Freeway"):
        full, minimal = jaxsim.make(f"MinAtar/{game}-v0"), jaxsim.make(f"MinAtar/{game}-v1")
        assert full.action_space(full.default_params).n == 6
        assert minimal.action_space(minimal.default_params).n == len(minimal.minimal_actions)
        assert jaxsim.make(f"MinAtar/{game}-v1", minimal_action_set=False) != full  # own id
    channels = {"Asterix": 4, "Breakout": 4, "Freeway": 7}
    for game, c in channels.items():
        env = jaxsim.make(f"MinAtar/{game}-v0")
        assert env.observation_space(env.default_params).shape == (10, 10, c)
        params = env.default_params
        assert float(params.sticky_action_prob) == pytest.approx(0.1)
        assert bool(params.difficulty_ramping)


def test_the_gymnasium_front_takes_the_minatar_ids():
    gymnasium = pytest.importorskip("gymnasium")
    import jaxsim.gymnasium as jg

    assert jg.register("MinAtar/Breakout-v0") == "jaxsim/MinAtar-Breakout-v0"
    assert jg.jaxsim_id("jaxsim/MinAtar-Freeway-v1") == "MinAtar/Freeway-v1"
    env = gymnasium.make("jaxsim/MinAtar-Breakout-v0")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (10, 10, 4) and set(np.unique(obs)) <= {0.0, 1.0}
    obs, reward, terminated, truncated, _ = env.step(1)
    assert obs.shape == (10, 10, 4)
    env.close()
    venv = jg.make_vec("MinAtar/Asterix-v1", num_envs=4)
    obs, _ = venv.reset(seed=0)
    obs, *_ = venv.step(np.zeros(4, np.int64))
    assert obs.shape == (4, 10, 10, 4)
    venv.close()


def test_bad_input_is_named_before_any_work():
    with pytest.raises(ValueError, match=r"sticky_action_prob.*<= 1.0.*got 1.5"):
        jaxsim.make("MinAtar/Breakout-v0", sticky_action_prob=1.5)
    with pytest.raises(ValueError, match=r"sticky_action_prob.*>= 0.0.*got -0.1"):
        jaxsim.make("MinAtar/Asterix-v0", sticky_action_prob=-0.1)
    with pytest.raises(ValueError, match=r"unknown environment id 'MinAtar/Pong-v0'.*Breakout"):
        jaxsim.make("MinAtar/Pong-v0")
    with pytest.raises(TypeError, match=r"minimal_action_set must be a bool"):
        jaxsim.make("MinAtar/Freeway-v0", minimal_action_set="yes")
    env = jaxsim.make("MinAtar/Breakout-v0")
    params = env.default_params
    state, _ = env.reset(KEY, params)
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), state)
    with pytest.raises(ValueError, match=r"state.ball_x has shape \(2,\).*one environment"):
        env.step(KEY, batch, jnp.int32(0), params)
    with pytest.raises(ValueError, match=r"action must be an integer array of shape \(\)"):
        env.step(KEY, state, jnp.zeros(2, jnp.int32), params)
    with pytest.raises(ValueError, match=r"state is a batch of 2 environments.*pick one"):
        env.render(batch)


def test_step_draws_its_sticky_uniform_from_its_key():
    """sticky_action_prob=1 repeats the last action always; 0 never; Env.step is key-driven."""
    env = jaxsim.make("MinAtar/Breakout-v0", sticky_action_prob=1.0)
    state, _ = env.reset(KEY, env.default_params)
    moved, _ = env.step(KEY, state, jnp.int32(3), env.default_params)
    assert int(moved.pos) == 4 and int(moved.last_action) == 0  # held: no-op
    params = env.default_params.replace(sticky_action_prob=jnp.float32(0.0))
    moved, _ = env.step(KEY, state, jnp.int32(3), params)
    assert int(moved.pos) == 5 and int(moved.last_action) == 3
    env = jaxsim.make("MinAtar/Breakout-v0", sticky_action_prob=0.5)
    held = [
        int(env.step(jax.random.key(i), state, jnp.int32(3), env.default_params)[0].pos == 4)
        for i in range(40)
    ]
    assert 5 < sum(held) < 35


def test_render_uses_the_original_colours():
    seaborn = pytest.importorskip("seaborn")
    for c in (4, 6, 7, 10):
        np.testing.assert_allclose(
            cubehelix_palette(c), np.asarray(seaborn.color_palette("cubehelix", c)), atol=1e-6
        )
    env = jaxsim.make("MinAtar/Breakout-v0")
    state, obs = env.reset(KEY, env.default_params)
    image = env.render(state)
    assert image.shape == (10 * CELL, 10 * CELL, 3) and image.dtype == np.uint8
    palette = np.round(cubehelix_palette(4) * 255).astype(np.uint8)
    # The paddle (channel 0) sits at row 9, column 4; bricks (channel 3) fill rows 1 ... 3.
    np.testing.assert_array_equal(image[9 * CELL, 4 * CELL], palette[0])
    np.testing.assert_array_equal(image[1 * CELL, 0], palette[3])
    np.testing.assert_array_equal(image[0, 0], [0, 0, 0])


def test_sticky_probability_is_a_per_environment_param():
    """Environment 0 never repeats, environment 1 always does (so never leaves its first no-op):
    its paddle stays in column 4 while environment 0's moves right."""
    env = jaxsim.make("MinAtar/Breakout-v0", max_episode_steps=6)
    params = env.default_params.replace(sticky_action_prob=jnp.array([0.0, 1.0], jnp.float32))
    right = jaxsim.OpenLoopPolicy(jnp.full((6, 2), 3, jnp.int32))
    out = jaxsim.rollout(env, right, 6, num_envs=2, key=KEY, params=params, outputs=("obs",))
    paddle = np.asarray(out.obs)[:, :, 9, :, 0].argmax(axis=-1)  # [t, env]: the paddle's column
    np.testing.assert_array_equal(paddle[:, 1], 4)
    np.testing.assert_array_equal(paddle[:, 0], [4, 5, 6, 7, 8, 9])
