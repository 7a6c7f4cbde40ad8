"""The fused backend: same trajectories as the scan backend, output selection, bad input.

`TestFused` runs the kernel in Pallas interpret mode (CI, any CPU); `TestFusedGPU` reruns every
test of it compiled for a GPU, switched by the class attribute `INTERPRET`, under the `gpu`
marker. Sizes are tiny and ragged on purpose: 13 environments in blocks of 8, 11 steps in
launches of 4 (4 + 4 + 3).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim
from benchmarks.gpu.lowering import TRITON_CALL, lower_for_cuda
from jaxsim import OpenLoopPolicy
from jaxsim.fused import FusedConfig, auto_backend, unsupported_reason
from jaxsim.fused import driver as fused_driver
from jaxsim.rollout import spec as rollout_spec
from jaxsim.rollout.trajectory import STEP_OUTPUTS, check_outputs


def fused_rollout(env, policy, n, *, num_envs, key, params, state, outputs, config, **kw):
    """The fused driver on the spec `jaxsim.rollout` would resolve, without its host-side
    checks: traceable (the CUDA lowering tests) and able to run the kernel's jnp reference."""
    reference = kw.pop("reference", False)
    spec, inputs = rollout_spec.make(
        env, n, num_envs, check_outputs(outputs), kw.pop("checks", False), key, params, state,
        params_sampler=kw.pop("params_sampler", None),
    )  # fmt: skip
    assert not kw, kw
    return fused_driver.run_fused(spec, policy, inputs, config, reference=reference)


KEY = jax.random.key(7)
N, NUM_ENVS = 11, 13
POLICIES = ("random", "mlp", "open_loop")
# Overrides that make every path happen within N steps: truncation and reset everywhere, and
# CartPole terminates (its pole falls past 0.03 rad within a few random steps).
ENVS = {
    "CartPole-v1": dict(max_episode_steps=6, theta_threshold_radians=0.03),
    "Pendulum-v1": dict(max_episode_steps=4),
    "MountainCar-v0": dict(max_episode_steps=5),
    "MountainCarContinuous-v0": dict(max_episode_steps=5),
    "Acrobot-v1": dict(max_episode_steps=5),
}


# The MLP's first hidden layer of 12 is padded to 16 by the fused backend, as are the
# observations of Pendulum (3) and Acrobot (6) and the actions of MountainCar and Acrobot (3).
def make_policy(kind, env, num_envs=NUM_ENVS, n=N, hidden=(12, 16)):
    space = env.action_space(env.default_params)
    if kind == "random":
        return jaxsim.random_policy(env)
    if kind == "mlp":
        return jaxsim.init_mlp_policy(jax.random.key(1), env, hidden=hidden)
    if isinstance(space, jaxsim.Discrete):
        actions = jax.random.randint(jax.random.key(2), (n, num_envs), 0, space.n, jnp.int32)
    else:
        actions = jax.random.uniform(jax.random.key(2), (n, num_envs, *space.shape), minval=-1)
    return OpenLoopPolicy(actions)


_SCANS = {}


def scan_of(env_id, kind):
    """The scan backend's N-step rollout of `env_id` (ENVS' overrides) under `make_policy(kind)`:
    (env, policy, trajectory), computed once per module run and shared by the tests that compare
    against it (one compiled scan per environment and policy)."""
    if (env_id, kind) not in _SCANS:
        env = jaxsim.make(env_id, **ENVS[env_id])
        policy = make_policy(kind, env)
        traj = jaxsim.rollout(env, policy, N, num_envs=NUM_ENVS, key=KEY, backend="scan")
        _SCANS[env_id, kind] = env, policy, traj
    return _SCANS[env_id, kind]


def assert_same_trajectory(scan, fused):
    """Integers and flags identical; floats within 1e-5 relative."""
    a, b = jax.tree.leaves_with_path(scan), jax.tree.leaves(fused)
    assert jax.tree.structure(scan) == jax.tree.structure(fused)
    for (path, x), y in zip(a, b, strict=True):
        x, y = np.asarray(x), np.asarray(y)
        name = jax.tree_util.keystr(path)
        assert x.shape == y.shape and x.dtype == y.dtype, (name, x.shape, y.shape, x.dtype, y.dtype)
        if np.issubdtype(x.dtype, np.floating):
            np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(y, x, err_msg=name)


class TestFused:
    INTERPRET = True

    def config(self, **kw):
        kw = dict(block_envs=8, steps_per_launch=4) | kw
        return FusedConfig(interpret=self.INTERPRET, **kw)

    def rollout(self, env, policy, n=N, num_envs=NUM_ENVS, **kw):
        return jaxsim.rollout(
            env, policy, n, num_envs=num_envs, key=KEY, backend="fused",
            fused_config=self.config(), **kw,
        )  # fmt: skip

    @pytest.mark.parametrize("kind", POLICIES)
    @pytest.mark.parametrize("env_id", list(ENVS))
    def test_same_trajectory_as_scan(self, env_id, kind):
        env, policy, scan = scan_of(env_id, kind)
        fused = self.rollout(env, policy)
        assert scan.done.any() and not scan.done.all()  # resets happened, mid-rollout
        if kind == "mlp":
            assert set(fused.extras) == {"log_prob", "value"}
        if kind == "open_loop":
            np.testing.assert_array_equal(fused.action, policy.actions)
        assert_same_trajectory(scan, fused)

    def test_kernel_equals_its_jnp_reference(self):
        env = jaxsim.make("Acrobot-v1", **ENVS["Acrobot-v1"])
        policy = make_policy("random", env)
        kw = dict(num_envs=NUM_ENVS, key=KEY, params=env.default_params, state=None)
        kw |= dict(outputs=STEP_OUTPUTS, config=self.config())
        kernel = fused_rollout(env, policy, N, **kw)
        reference = fused_rollout(env, policy, N, reference=True, **kw)
        assert_same_trajectory(reference, kernel)

    @pytest.mark.parametrize("outputs", ["rewards", "stats", ("action", "extras", "episode_stats")])
    def test_both_backends_keep_only_the_selected_outputs(self, outputs):
        env, policy, full = scan_of("CartPole-v1", "mlp" if "extras" in outputs else "random")
        scan = jaxsim.rollout(
            env, policy, N, num_envs=NUM_ENVS, key=KEY, backend="scan", outputs=outputs,
            checks=True,  # checks only what was kept
        )  # fmt: skip
        fused = self.rollout(env, policy, outputs=outputs)
        kept = {"rewards": {"reward", "terminated", "truncated"}, "stats": set()}.get(
            outputs, {"action", "extras"}
        )
        for traj in (scan, fused):
            for name in ("obs", "action", "reward", "terminated", "truncated", "next_obs"):
                assert (getattr(traj, name) is None) == (name not in kept), name
                if name in kept:
                    np.testing.assert_array_equal(getattr(traj, name), getattr(full, name))
            assert (traj.stats is None) == (outputs == "rewards")
        assert_same_trajectory(scan.final_state, full.final_state)
        assert (np.asarray(scan.checks.first_step) == -1).all()  # checked, nothing failed
        assert_same_trajectory(scan.replace(checks=None), fused)
        if outputs != "rewards":
            expected = full.episode_stats()
            assert int(expected.count) > 0
            for stats in (scan.stats, fused.stats):
                assert int(stats.count) == int(expected.count)
                np.testing.assert_allclose(stats.mean_return, expected.mean_return, rtol=1e-5)
                np.testing.assert_allclose(stats.std_return, expected.std_return, rtol=1e-4)
                np.testing.assert_allclose(stats.mean_length, expected.mean_length, rtol=1e-5)

    def test_continues_from_a_given_state_like_scan(self):
        env, _, first = scan_of("Pendulum-v1", "random")
        state = first.final_state
        key = jax.random.key(3)
        scan = jaxsim.rollout(env, "random", 6, key=key, state=state, backend="scan")
        fused = jaxsim.rollout(
            env, "random", 6, key=key, state=state, backend="fused", fused_config=self.config()
        )
        assert_same_trajectory(scan, fused)

    def test_runs_inside_jit_and_new_weights_reuse_the_compiled_kernel(self):
        env = jaxsim.make("CartPole-v1")
        cfg = self.config()

        @jax.jit
        def total_reward(policy, key):
            traj = jaxsim.rollout(
                env, policy, 5, num_envs=8, key=key, backend="fused", fused_config=cfg,
                outputs="rewards",
            )  # fmt: skip
            return traj.reward.sum()

        for seed in (1, 2):
            policy = jaxsim.init_mlp_policy(jax.random.key(seed), env, hidden=(16, 16))
            assert float(total_reward(policy, jax.random.key(seed))) == 5 * 8
        assert total_reward._cache_size() == 1

    @pytest.mark.parametrize("first_layer", ["columns", "chunks"])
    def test_an_mlp_read_by_columns_or_chunks_acts_as_the_scan(self, first_layer):
        """mlp_first_layer "columns" (the first layers as sums of per-component products) and
        "chunks" (dots of a few components at a time): the scan's actions, rewards and
        observations; log-probs and values to rounding."""
        env, policy, scan = scan_of("Acrobot-v1", "mlp")  # 6 components, padded to 8
        config = self.config(mlp_first_layer=first_layer)
        fused = jaxsim.rollout(
            env, policy, N, num_envs=NUM_ENVS, key=KEY, backend="fused", fused_config=config
        )
        assert_same_trajectory(scan, fused)


@pytest.mark.gpu
class TestFusedGPU(TestFused):
    INTERPRET = False

    def test_auto_picks_fused_on_a_gpu_where_triton_takes_the_policy(self):
        env = jaxsim.make("CartPole-v1")
        for kind in POLICIES:
            assert auto_backend(env, make_policy(kind, env)) == "fused", kind


# ----------------------------------------------------------------- the GPU lowering, from a CPU
@pytest.mark.parametrize("kind", POLICIES)
@pytest.mark.parametrize("env_id", list(ENVS))
def test_kernel_lowers_for_triton_on_cuda(env_id, kind):
    """Lowers (without compiling) for CUDA: Triton lowering gaps show up without a GPU.

    The MLP is the benchmark's actor-critic (two hidden layers of 64), padded by the backend
    to power-of-two sizes where the environment's observation or action count is not one.
    """
    env = jaxsim.make(env_id)
    cfg = FusedConfig(block_envs=128, steps_per_launch=8, interpret=False)

    def run(key):  # the policy is made inside: traced, never run (no eager initialisation)
        policy = make_policy(kind, env, num_envs=256, n=20, hidden=(64, 64))
        return jaxsim.rollout(
            env, policy, 20, num_envs=256, key=key, backend="fused", fused_config=cfg
        )

    assert TRITON_CALL in lower_for_cuda(run, KEY).as_text()


def test_kernel_with_per_env_and_per_episode_params_and_checks_lowers_for_triton_on_cuda():
    """Per-environment params travel as [block] inputs, a sampler's ranges as whole inputs,
    checked mode's record as carry."""
    env = jaxsim.make("Acrobot-v1")
    cfg = FusedConfig(block_envs=128, steps_per_launch=8, interpret=False)
    dr = jaxsim.uniform_params(env, link_mass_1=(0.5, 2.0), max_episode_steps=(50, 500))

    def run(key):
        params = dr.sample(key, 256, env.default_params).replace(g=jnp.full((256,), 9.8))
        policy = make_policy("mlp", env, num_envs=256, n=20, hidden=(64, 64))
        return fused_rollout(
            env, policy, 20, num_envs=256, key=key, params=params, state=None, outputs="stats",
            config=cfg, params_sampler=dr, checks=True,
        )  # fmt: skip

    assert TRITON_CALL in lower_for_cuda(run, KEY).as_text()


def test_a_pallas_kernel_lowers_for_cuda_inside_the_abstract_h200_mesh_with_no_gpu():
    """The deviceless form every lowering test uses: jax 0.11 refuses a Triton lowering with
    no GPU unless an abstract mesh names one; 0.10 lowers either way."""
    if jax.default_backend() == "gpu":
        pytest.skip("a GPU is present: this checks the lowering without one")
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as pltriton

    def double(x_ref, o_ref):
        o_ref[...] = 2 * x_ref[...]

    def run(x):
        out = jax.ShapeDtypeStruct(x.shape, x.dtype)
        triton = pltriton.CompilerParams(num_warps=4)  # as the fused kernel asks
        return pl.pallas_call(double, out_shape=out, compiler_params=triton)(x)

    lowered = lower_for_cuda(run, jax.ShapeDtypeStruct((128,), jnp.float32))
    assert TRITON_CALL in lowered.as_text()
    assert jax.sharding.get_abstract_mesh().empty  # the mesh ends with the lowering


# ------------------------------------------------------------------------------- choosing, errors
def test_auto_picks_scan_on_a_cpu_and_for_what_the_kernel_cannot_run():
    env = jaxsim.make("CartPole-v1")
    if jax.default_backend() != "gpu":
        assert auto_backend(env, jaxsim.random_policy(env)) == "scan"
    assert auto_backend(env, lambda key, obs: jnp.zeros(obs.shape[0], jnp.int32)) == "scan"


def test_open_loop_policy_plays_its_actions_on_the_scan_backend():
    env = jaxsim.make("MountainCarContinuous-v0")
    policy = make_policy("open_loop", env, n=N + 3)  # steps past n are not played
    traj = jaxsim.rollout(env, policy, N, num_envs=NUM_ENVS, key=KEY, backend="scan")
    np.testing.assert_array_equal(traj.action, policy.actions[:N])
    with pytest.raises(TypeError, match=r"no step.*actions\[t\]"):
        policy(KEY, traj.obs[0])


def test_an_action_of_logit_minus_inf_is_never_sampled():
    """Even where rounding leaves the CDF's total below u: the case padding must not reach."""
    logits = jnp.array([[0.0, 0.0, 0.0, -jnp.inf]] * 3)
    logp = jnp.log(jnp.array([[0.25, 0.25, 0.25, 0.0]] * 3))  # total 0.75, as if rounded down
    action = jaxsim.policies._sample_categorical(logits, logp, jnp.array([0.1, 0.6, 0.9]))
    np.testing.assert_array_equal(action, [0, 2, 2])


class _NoisyCartPole(type(jaxsim.make("CartPole-v1"))):
    draws = jaxsim.Draws(reset=4, step="key")

    def dynamics(self, s, action, p, key):  # a step that takes a key (and ignores it)
        return super().dynamics(s, action, p)


@pytest.mark.parametrize(
    "env, policy, match",
    [
        (jaxsim.make("CartPole-v1"), lambda k, o: jnp.zeros(o.shape[0], jnp.int32), "opaque"),
        (_NoisyCartPole(), "random", "draws from a PRNG key"),
    ],
)
def test_what_the_kernel_cannot_run_is_refused_with_the_reason(env, policy, match):
    with pytest.raises(ValueError, match=rf"{match}.*use backend='scan'"):
        jaxsim.rollout(env, policy, 3, num_envs=2, backend="fused")
    if not isinstance(policy, str):
        assert "opaque" in unsupported_reason(env, policy)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(block_envs=12), r"power of two in \[1, 65536\]"),
        (dict(block_envs=0), r"power of two in \[1, 65536\]"),
        (dict(steps_per_launch=0), r"integer in \[1, 1048576\]"),
        (dict(steps_per_launch=2.0), r"integer in \[1, 1048576\]"),
        (dict(num_warps=3), r"one of \(1, 2, 4, 8, 16, 32\)"),
        (dict(interpret="yes"), "None or a bool"),
        (
            dict(mlp_first_layer="sum"),
            r"mlp_first_layer must be 'dot', 'columns' or 'chunks', got 'sum'",
        ),
    ],
)
def test_invalid_tuning_is_rejected_with_the_valid_range(kw, match):
    with pytest.raises(ValueError, match=match):
        FusedConfig(**kw)


def test_bad_outputs_and_open_loop_shapes_are_named():
    env = jaxsim.make("CartPole-v1")
    with pytest.raises(ValueError, match="unknown outputs preset 'reward'"):
        jaxsim.rollout(env, "random", 3, outputs="reward")
    with pytest.raises(ValueError, match=r"unknown outputs \['rewardz'\]"):
        jaxsim.rollout(env, "random", 3, outputs=("rewardz",))
    short = OpenLoopPolicy(jnp.zeros((2, 4), jnp.int32))
    for backend in ("scan", "fused"):
        with pytest.raises(ValueError, match=r"need shape \(>= 3, 4\)"):
            jaxsim.rollout(env, short, 3, num_envs=4, backend=backend)
    with pytest.raises(TypeError, match="FusedConfig"):
        jaxsim.rollout(env, "random", 3, backend="fused", fused_config=dict(block_envs=8))
    assert dataclasses.replace(FusedConfig(), block_envs=8).block_envs == 8
