"""Swarm-v0, the family whose state grows with N: physics against an independent float64 numpy
reference (and its conserved momentum and energy), reset draws, rollout semantics, scan == fused
at small, medium and the largest size, the Triton lowering at every size, and PPO learning.

Sizes are tiny on purpose (interpret-mode Pallas is slow): 13 environments in blocks of 8, 11
steps in launches of 4 (4 + 4 + 3).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim
from benchmarks.gpu.lowering import TRITON_CALL, lower_for_cuda
from jaxsim.envs.swarm import SIZED, Swarm, SwarmState
from jaxsim.fused import FusedConfig

KEY = jax.random.key(3)
N_STEPS, NUM_ENVS = 11, 13
LARGEST = 4096  # the largest num_particles make accepts: 80 KB of state per environment
# Every path within N_STEPS: truncation at 5 steps, and some centres start outside the arena
# (terminated at once) while others start inside it.
SHORT = dict(max_episode_steps=5, arena=1.5)


# ------------------------------------------------------------------- the float64 numpy reference
def reference_step(state, action, params):
    """One step of one swarm in float64 numpy, from the physics in swarm.py's docstring.

    `state` maps x, y, vx, vy, mass to [N] arrays; `params` is a SwarmParams (read as floats).
    Returns (next state dict, obs [8], reward, terminated).
    """
    p = {k: float(v) for k, v in vars(params).items()}
    a = np.clip(np.asarray(action, np.float64), -1.0, 1.0)
    m = state["mass"]
    nxt = dict(mass=m)
    for r, v, push in (("x", "vx", p["max_force"] * a[0]), ("y", "vy", p["max_force"] * a[1])):
        pos, vel = state[r], state[v]
        force = push - p["spring"] * (pos - pos.mean()) - p["damping"] * vel
        nxt[v] = vel + p["dt"] * force / m
        nxt[r] = pos + p["dt"] * nxt[v]
    obs = reference_obs(nxt, p)
    d2 = obs[0] ** 2 + obs[1] ** 2
    s2 = obs[4] ** 2 + obs[5] ** 2
    reward = 1.0 / (1.0 + d2 + p["spread_cost"] * s2) - p["action_cost"] * (a**2).sum()
    cx, cy = nxt["x"].mean(), nxt["y"].mean()
    terminated = abs(cx) > p["arena"] or abs(cy) > p["arena"]
    return nxt, obs, reward, terminated


def reference_obs(s, p):
    return np.array(
        [p["goal_x"] - s["x"].mean(), p["goal_y"] - s["y"].mean(), s["vx"].mean(), s["vy"].mean()]
        + [s[k].std() for k in ("x", "y", "vx", "vy")]
    )


def random_states(rng, n, size):
    """n states of `size` particles (float32), some centroids beyond the default arena of 4."""
    center = rng.uniform(-5, 5, (n, 2, 1))
    return dict(
        x=center[:, 0] + rng.normal(0, 0.5, (n, size)),
        y=center[:, 1] + rng.normal(0, 0.5, (n, size)),
        vx=rng.normal(0, 1, (n, size)),
        vy=rng.normal(0, 1, (n, size)),
        mass=rng.uniform(0.5, 1.5, (n, size)),
    )


def momentum_and_energy(s, spring):
    m = s["mass"]
    momentum = np.array([(m * s["vx"]).sum(), (m * s["vy"]).sum()])
    kinetic = 0.5 * (m * (s["vx"] ** 2 + s["vy"] ** 2)).sum()
    potential = (
        0.5 * spring * (((s["x"] - s["x"].mean()) ** 2 + (s["y"] - s["y"].mean()) ** 2).sum())
    )
    return momentum, kinetic + potential


@pytest.mark.parametrize("size", [1, 16, 256])
def test_steps_match_the_float64_reference(size):
    env = jaxsim.make("Swarm-v0", num_particles=size)
    params = env.default_params
    rng = np.random.default_rng(size)
    n = 40
    states = {k: v.astype(np.float32) for k, v in random_states(rng, n, size).items()}
    actions = rng.uniform(-1.5, 1.5, (n, 2)).astype(np.float32)  # some beyond the bounds
    batched = SwarmState(**{k: jnp.asarray(v) for k, v in states.items()}, time=jnp.zeros(n, int))
    step = jax.jit(jax.vmap(env.step, in_axes=(None, 0, 0, None)))
    next_state, ts = step(KEY, batched, jnp.asarray(actions), params)
    terminated = []
    for i in range(n):
        one = {k: v[i].astype(np.float64) for k, v in states.items()}
        ref, obs, reward, term = reference_step(one, actions[i], params)
        for name in ("x", "y", "vx", "vy", "mass"):
            got = np.asarray(getattr(next_state, name)[i])
            np.testing.assert_allclose(got, ref[name], rtol=1e-5, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(ts.obs[i], obs, rtol=1e-4, atol=2e-5)
        np.testing.assert_allclose(ts.reward[i], reward, rtol=1e-5, atol=1e-6)
        assert bool(ts.terminated[i]) == term
        terminated.append(term)
    assert any(terminated) and not all(terminated)
    np.testing.assert_array_equal(next_state.time, 1)


def test_reference_conserves_momentum_and_energy_without_action_or_drag():
    """The invariants the physics promises, checked on the reference, then on jaxsim's step."""
    env = jaxsim.make("Swarm-v0", num_particles=32, damping=0.0, spring=1.0, dt=0.01)
    params = env.default_params
    s = {k: v[0] for k, v in random_states(np.random.default_rng(0), 1, 32).items()}
    p0, e0 = momentum_and_energy(s, 1.0)
    energies = []
    for _ in range(2000):
        s = reference_step(s, np.zeros(2), params)[0]
        p, e = momentum_and_energy(s, 1.0)
        np.testing.assert_allclose(p, p0, rtol=0, atol=1e-10 * (1 + np.abs(p0).max()))
        energies.append(e)
    energies = np.asarray(energies)
    # Semi-implicit Euler: energy oscillates by O(omega dt) around its value, without drift.
    assert np.abs(energies / e0 - 1).max() < 0.02
    assert abs(energies[-200:].mean() / energies[:200].mean() - 1) < 0.005
    # A push changes momentum by exactly dt * (N * force - drag * sum v): nothing else leaks.
    drag = jaxsim.make("Swarm-v0", num_particles=32, damping=0.7).default_params
    a = np.array([0.3, -0.8])
    s1 = reference_step(s, a, drag)[0]
    expected = momentum_and_energy(s, 1.0)[0] + 0.05 * (
        32 * a - 0.7 * np.array([s["vx"].sum(), s["vy"].sum()])
    )
    np.testing.assert_allclose(momentum_and_energy(s1, 1.0)[0], expected, rtol=1e-12, atol=1e-12)
    # jaxsim's float32 step keeps the momentum to rounding over 200 steps.
    state = SwarmState(**{k: jnp.asarray(v, jnp.float32) for k, v in s.items()}, time=jnp.int32(0))
    step = jax.jit(lambda st: env.step(KEY, st, jnp.zeros(2), params)[0])
    start = momentum_and_energy({k: np.asarray(getattr(state, k), np.float64) for k in s}, 1.0)
    for _ in range(200):
        state = step(state)
    end = momentum_and_energy({k: np.asarray(getattr(state, k), np.float64) for k in s}, 1.0)
    np.testing.assert_allclose(end[0], start[0], atol=1e-4 * (1 + np.abs(start[0]).max()))


# -------------------------------------------------------------------------------- make and reset
def test_ids_state_the_size_and_make_takes_any_power_of_two():
    assert [cls.id for cls in SIZED] == [f"Swarm-N{n}-v0" for n in (4, 16, 64, 256)]
    for cls in SIZED:
        assert cls.id in jaxsim.registered_ids()
        env = jaxsim.make(cls.id)
        assert env.config.num_particles == cls.size
        assert jaxsim.make(cls.id, **env.make_kwargs()) == env
    env = jaxsim.make("Swarm-v0", num_particles=64)
    state, obs = env.reset(KEY, env.default_params)
    assert state.x.shape == (64,) and obs.shape == (8,)  # the observation does not grow
    assert env != jaxsim.make("Swarm-v0") and env == jaxsim.make("Swarm-v0", num_particles=64)
    with pytest.raises(ValueError, match=r"num_particles .* power of two .*got 12"):
        jaxsim.make("Swarm-v0", num_particles=12)
    with pytest.raises(ValueError, match=r"Swarm-N16-v0: num_particles is 16.*'Swarm-v0'"):
        jaxsim.make("Swarm-N16-v0", num_particles=64)


def test_reset_draws_each_particle_independently_from_the_declared_distribution():
    env = jaxsim.make("Swarm-v0", num_particles=16)
    p = env.default_params
    keys = jax.random.split(KEY, 4000)
    state, obs = jax.vmap(env.reset, in_axes=(0, None))(keys, p)
    x, mass = np.asarray(state.x), np.asarray(state.mass)
    assert np.all(np.asarray(state.vx) == 0) and np.all(np.asarray(state.time) == 0)
    assert mass.min() >= p.mass_low and mass.max() < p.mass_high
    np.testing.assert_allclose(mass.mean(), 1.0, atol=0.01)
    # Within an environment particles lie in a square of half-width reset_spread: the centre is
    # shared, so a difference of two particles is the difference of two independent offsets.
    assert np.ptp(x, axis=1).max() <= 2 * p.reset_spread
    diff = x[:, 0] - x[:, 1]
    np.testing.assert_allclose(diff.var(), 2 * (2 * p.reset_spread) ** 2 / 12, rtol=0.08)
    assert abs(np.corrcoef(diff, x[:, 2] - x[:, 3])[0, 1]) < 0.05
    centre = x.mean(axis=1)
    assert centre.min() > -p.reset_center - p.reset_spread and abs(centre.mean()) < 0.05
    # Counter-based: the same (seed, index, counter) gives the same swarm, another counter not.
    seed = jaxsim.rng.seed_from_key(KEY)
    a, b, c = (env.reset_at(seed, 5, t, p)[0].x for t in (7, 7, 8))
    np.testing.assert_array_equal(a, b)
    assert not np.any(np.asarray(a) == np.asarray(c))


# -------------------------------------------------------------------------- rollout semantics
def test_auto_reset_next_obs_and_chained_rollouts():
    env = jaxsim.make("Swarm-N4-v0", **SHORT)
    params = env.default_params
    first = jaxsim.rollout(env, "random", 12, num_envs=6, key=KEY)
    done, term = np.asarray(first.done), np.asarray(first.terminated)
    obs, next_obs = np.asarray(first.obs), np.asarray(first.next_obs)
    assert term.any() and np.asarray(first.truncated).any()
    np.testing.assert_array_equal(obs[1:][~done[:-1]], next_obs[:-1][~done[:-1]])
    seed = jaxsim.rng.seed_from_key(jax.random.split(KEY, 3)[0])
    for t, i in zip(*np.nonzero(done[:-1]), strict=True):
        _, reset_obs = env.reset_at(seed, jnp.uint32(i), jnp.uint32(t + 1), params)
        np.testing.assert_allclose(obs[t + 1, i], reset_obs, rtol=1e-6, atol=1e-7)
    # Terminal observations: the centroid (goal 0 minus the first two components) left the arena.
    assert np.all(np.abs(next_obs[..., :2][term]).max(-1) > params.arena)
    np.testing.assert_array_equal(np.asarray(first.episode_length)[first.truncated], 5)
    second = jaxsim.rollout(env, "random", 7, key=jax.random.key(9), state=first.final_state)
    np.testing.assert_array_equal(second.obs[0], first.final_state.obs)
    length = np.concatenate([first.episode_length, second.episode_length])
    assert length.max() <= 5 and np.all(
        np.diff(length, axis=0)[~np.concatenate([done, second.done])[:-1]] == 1
    )


# ------------------------------------------------------------------------------ scan == fused
def assert_same(scan, fused, rtol=0.0):
    """Integers and flags identical; floats bit for bit (the means over particles add in one
    fixed order), or within `rtol` where an MLP policy's matmuls (padded in the kernel) add
    theirs differently."""
    assert jax.tree.structure(scan) == jax.tree.structure(fused)
    for (path, x), y in zip(jax.tree.leaves_with_path(scan), jax.tree.leaves(fused), strict=True):
        x, y, name = np.asarray(x), np.asarray(y), jax.tree_util.keystr(path)
        assert x.shape == y.shape and x.dtype == y.dtype, name
        if np.issubdtype(x.dtype, np.floating) and rtol:
            np.testing.assert_allclose(y, x, rtol=rtol, atol=rtol, err_msg=name)
        else:
            np.testing.assert_array_equal(y, x, err_msg=name)


def fused_config(**kw):
    return FusedConfig(**(dict(block_envs=8, steps_per_launch=4, interpret=True) | kw))


@pytest.mark.parametrize(
    "env_id, size, kind",
    [("Swarm-N4-v0", 4, "mlp"), ("Swarm-N64-v0", 64, "per_env"), ("Swarm-v0", LARGEST, "random")],
)
def test_fused_equals_scan_at_small_medium_and_largest_size(env_id, size, kind):
    """The MLP policy at the smallest size; per-environment params and per-episode draws at the
    medium one (params [num_envs] meet particles [num_envs, N] in the dynamics)."""
    env = jaxsim.make(env_id, **SHORT, **({"num_particles": size} if env_id == "Swarm-v0" else {}))
    kw = dict(num_envs=NUM_ENVS, key=KEY)
    policy = jaxsim.random_policy(env)
    if kind == "mlp":
        policy = jaxsim.init_mlp_policy(jax.random.key(1), env, hidden=(16, 16))
    if kind == "per_env":
        dr = jaxsim.uniform_params(env, spring=(1.0, 6.0), mass_high=(1.0, 2.0), arena=(1.0, 2.0))
        params = dr.sample(jax.random.key(4), NUM_ENVS, env.default_params)
        kw |= dict(params=params, params_sampler=dr)
    scan = jaxsim.rollout(env, policy, N_STEPS, backend="scan", **kw)
    fused = jaxsim.rollout(env, policy, N_STEPS, backend="fused", fused_config=fused_config(), **kw)
    assert scan.terminated.any() and scan.truncated.any() and not scan.done.all()
    assert_same(scan, fused, rtol=1e-5 if kind == "mlp" else 0.0)
    assert fused.final_state.env_state.x.shape == (NUM_ENVS, size)


def test_means_over_particles_are_bitwise_alike_for_any_batch_shape():
    """XLA ordered `jnp.mean`'s additions by shape: a vmapped [16, 256] batch and the kernel's
    [4, 256] blocks parted in the last bit at step 0 (3.6e-7); the fixed pairwise order does not."""
    env = jaxsim.make("Swarm-N256-v0", **SHORT)
    kw = dict(num_envs=16, key=KEY)
    scan = jaxsim.rollout(env, "random", 6, backend="scan", **kw)
    config = fused_config(block_envs=4, steps_per_launch=3)
    assert_same(scan, jaxsim.rollout(env, "random", 6, backend="fused", fused_config=config, **kw))


def test_fused_continues_from_a_given_state_like_scan():
    env = jaxsim.make("Swarm-N4-v0", **SHORT)
    first = jaxsim.rollout(env, "random", 3, num_envs=NUM_ENVS, key=KEY)
    kw = dict(key=jax.random.key(5), state=first.final_state, outputs="rewards")
    assert_same(
        jaxsim.rollout(env, "random", 6, backend="scan", **kw),
        jaxsim.rollout(env, "random", 6, backend="fused", fused_config=fused_config(), **kw),
    )


# -------------------------------------------------------------------- the GPU lowering, from a CPU
@pytest.mark.parametrize("size", [1, *(cls.size for cls in SIZED), LARGEST])
def test_kernel_lowers_for_triton_on_cuda_at_every_size(size):
    """Lowers (without compiling) for CUDA, with the benchmark's actor-critic and all outputs.

    Lowering is not compiling: whether [block, N] state fits in registers is a GPU question.
    """
    env = jaxsim.make("Swarm-v0", num_particles=size)
    cfg = FusedConfig(block_envs=32, steps_per_launch=8, interpret=False)

    def run(key):
        policy = jaxsim.init_mlp_policy(jax.random.key(0), env, hidden=(64, 64))
        return jaxsim.rollout(
            env, policy, 20, num_envs=64, key=key, backend="fused", fused_config=cfg
        )

    assert TRITON_CALL in lower_for_cuda(run, KEY).as_text()


def test_the_kernel_refuses_a_state_size_triton_cannot_tile():
    class OddSwarm(Swarm):  # three particles: not a power of two
        draws = jaxsim.Draws(reset=((), (), (3,), (3,), (3,)))

    reason = jaxsim.fused.unsupported_reason(OddSwarm(), jaxsim.random_policy(OddSwarm()))
    assert "power-of-two" in reason and "(3,)" in reason


# ------------------------------------------------------------------------------------- learning
def test_ppo_learns_the_smallest_swarm_above_a_random_policy():
    """32k steps (about 25 s on two CPU cores): random play earns about 63 per 200-step episode,
    PPO about 130 by the end of this run (two seeds tried); the bar is 1.5x random."""
    from agents import PPOConfig, make_train

    env = jaxsim.make("Swarm-N4-v0")
    config = PPOConfig(
        total_steps=16 * 64 * 32,
        num_envs=16,
        num_steps=64,
        num_minibatches=4,
        learning_rate=3e-3,
        ent_coef=0.0,
        hidden=(32, 32),
        eval_envs=16,
    )
    _, metrics = jax.jit(make_train(config, env))(jax.random.key(1))
    random_return = jaxsim.rollout(env, "random", 800, num_envs=64, key=KEY).episode_stats()
    learned = float(np.asarray(metrics.mean_return)[-3:].mean())
    assert learned > 1.5 * float(random_return.mean_return), (learned, random_return)


# ------------------------------------------------------------------------------- traffic model
def test_traffic_model_counts_state_every_step_for_the_scan_and_once_per_launch_fused():
    from benchmarks.fusion_sizes.measure import traffic_model

    for size in (1, 1024):
        env = jaxsim.make("Swarm-v0", num_particles=size)
        model = traffic_model(env, "rewards", 64, (8, 64), 16)
        state = 20 * size + 4
        carried = state + 8  # plus episode return and length
        assert model["state_bytes_per_env"] == state
        assert model["output_bytes_per_step"] == 6  # reward f32, terminated and truncated int8
        assert model["scan_bytes_per_step"] == 6 + 2 * carried
        # Fused: outputs, the state in and out once per launch, and the epilogue turning two
        # int8 flags into bools (a byte read and a byte written each).
        for k in (8, 64):
            np.testing.assert_allclose(model["fused_bytes_per_step"][k], 6 + 2 * carried / k + 4)
    assert 7 < model["predicted_ratio"][8] < 8 and 50 < model["predicted_ratio"][64] < 64
