"""The cases the profiler breakdown measures: one-jit PPO (scan or fused), a rollout alone, a
Gymnasium-loop PPO and any agent (PPO, DQN, SAC) at its preset, each a function to profile and
a check of its output."""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxsim
from benchmarks.harness.optional import Skipped
from benchmarks.harness.timing import continued_rollout
from jaxsim.profiler import DEFAULT_PHASES

ENV_ID = "CartPole-v1"
OFF_POLICY_PHASES = ("replay", "target_update")  # what an off-policy agent is expected to name


@dataclasses.dataclass
class Case:
    label: str
    kind: str  # "on-policy" or "off-policy"
    fn: Callable[[], Any]
    steps_per_iteration: int
    check: Callable[[Any], str | None]  # None if the output is sane, else what is wrong
    phases: tuple[str, ...] = DEFAULT_PHASES
    notes: str = ""


# ------------------------------------------------------------------------------------------ PPO
def _config(args, backend: str):
    from agents.ppo import PPOConfig

    batch = args.num_envs * args.num_steps
    return PPOConfig(
        total_steps=batch,
        num_envs=args.num_envs,
        num_steps=args.num_steps,
        update_epochs=args.update_epochs,
        num_minibatches=args.num_minibatches,
        rollout_backend=backend,
    )


def _fused_notes(backend: str, env, policy) -> list[str]:
    """On the fused backend: Skipped where it cannot run `policy` on `env` (or does not exist in
    this checkout); the note a CPU's figure needs. Nothing on the scan backend."""
    if backend != "fused":
        return []
    if importlib.util.find_spec("jaxsim.fused") is None:
        raise Skipped("jaxsim.fused does not exist in this checkout")
    from jaxsim import fused

    reason = fused.unsupported_reason(env, policy)
    if reason is not None:
        raise Skipped(f"fused backend: {reason}")
    cpu = jax.default_backend() == "cpu"
    return ["Pallas interpret mode on the CPU: not a GPU figure"] if cpu else []


def _check_ppo(out) -> str | None:
    _, metrics = out
    loss = np.asarray(metrics.loss.total)
    return None if np.isfinite(loss).all() else f"non-finite PPO loss {loss}"


def ppo_case(args, backend: str) -> Case:
    from agents.ppo import PPO

    env = jaxsim.make(args.env)
    agent = PPO(_config(args, backend), env)
    runner = jax.jit(agent.init)(jax.random.key(args.seed))
    notes = "; ".join(_fused_notes(backend, env, agent.policy(runner)))
    run = agent.jit_run(1, vmapped=False)
    return Case(
        label=f"ppo_{backend}",
        kind="on-policy",
        fn=lambda: run(runner),
        steps_per_iteration=args.num_envs * args.num_steps,
        check=_check_ppo,
        notes=notes,
    )


# ----------------------------------------------------------------------------- rollout only
def rollout_case(args, backend: str) -> Case:
    """Experience collection alone: jaxsim.rollout under an MLP policy, one rollout a call."""
    env = jaxsim.make(args.env)
    key = jax.random.key(args.seed)
    policy = jaxsim.init_mlp_policy(jax.random.fold_in(key, 1), env)
    notes = ["no learning: simulation and policy inference only"]
    notes += _fused_notes(backend, env, policy)
    collect = continued_rollout(
        env, policy, args.num_steps, num_envs=args.num_envs, key=key, backend=backend
    )

    def check(out):
        reward = np.asarray(out.reward)
        return None if np.isfinite(reward).all() else "non-finite rewards"

    return Case(
        label=f"rollout_{backend}",
        kind="collection",
        fn=collect,
        steps_per_iteration=args.num_envs * args.num_steps,
        check=check,
        notes="; ".join(notes),
    )


# --------------------------------------------------------------------- classic CPU-simulator loop
def _learn_fn(agent):
    """PPO's learning step (GAE, epochs of minibatch steps) on a collected batch, as in agents.ppo.

    Written against agents' public pieces (losses, to_policy, the learner's optimizer) so the
    classic loop learns exactly as much per update as the one-jit PPO.
    """
    import optax

    from agents import losses
    from agents.networks import to_policy

    c = agent.config

    def minibatch(train, mb):
        params, opt_state = train

        def loss_fn(params):
            log_prob, entropy, value = to_policy(params).evaluate(mb["obs"], mb["action"])
            advantage = losses.normalize_advantage(mb["advantage"])
            pg, _, _ = losses.clipped_policy_loss(log_prob, mb["log_prob"], advantage, c.clip_eps)
            v = losses.value_loss(value, mb["value"], mb["target"], c.clip_eps)
            return pg + c.vf_coef * v - c.ent_coef * losses.entropy_bonus(entropy)

        with jax.named_scope("loss"):
            loss, vjp_fn = jax.vjp(loss_fn, params)
        with jax.named_scope("backward"):
            (grads,) = vjp_fn(jnp.ones_like(loss))
        with jax.named_scope("optimizer"):
            updates, opt_state = agent.learner.optimizer.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
        return (params, opt_state), loss

    def epoch(batch, train, key):
        perm = jax.random.permutation(key, c.batch_size)
        mbs = jax.tree.map(
            lambda x: x[perm].reshape((c.num_minibatches, c.minibatch_size, *x.shape[1:])), batch
        )
        return jax.lax.scan(minibatch, train, mbs)

    def learn(params, opt_state, traj, key):
        with jax.named_scope("gae"):
            _, _, next_value = to_policy(params).evaluate(traj["next_obs"], traj["action"])
            advantage, target = losses.gae(
                traj["reward"],
                traj["value"],
                next_value.reshape(traj["value"].shape),
                traj["terminated"],
                traj["truncated"],
                c.gamma,
                c.gae_lambda,
            )
        batch = {k: traj[k] for k in ("obs", "action", "log_prob", "value")}
        batch.update(advantage=advantage, target=target)
        batch = jax.tree.map(lambda x: x.reshape((c.batch_size, *x.shape[2:])), batch)
        keys = jax.random.split(key, c.update_epochs)
        train, loss = jax.lax.scan(functools.partial(epoch, batch), (params, opt_state), keys)
        return train, loss

    return jax.jit(learn)


def gym_case(args) -> Case:
    try:
        import gymnasium as gym
    except ImportError as e:
        raise Skipped(f"gymnasium is not installed ({e})") from e
    from agents.ppo import PPO

    agent = PPO(_config(args, "scan"), jaxsim.make(args.env))
    runner = jax.jit(agent.init)(jax.random.key(args.seed))
    policy = agent.policy(runner)
    kwargs = {}
    mode = getattr(gym.vector, "AutoresetMode", None)
    if mode is not None:  # same-step reset, as jaxsim does: final obs in info["final_obs"]
        kwargs["autoreset_mode"] = mode.SAME_STEP
    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.make(args.env) for _ in range(args.num_envs)], **kwargs
    )
    obs0, _ = envs.reset(seed=args.seed)
    state = {"obs": obs0}
    key = jax.random.key(args.seed + 1)

    @jax.jit
    def act(policy, key, t, obs):
        with jax.named_scope("policy"):
            return policy(jax.random.fold_in(key, t), obs)

    learn = _learn_fn(agent)

    def iteration():
        cols = {k: [] for k in ("obs", "action", "log_prob", "value", "reward", "next_obs")}
        cols.update(terminated=[], truncated=[])
        obs = state["obs"]
        for t in range(args.num_steps):
            action, extras = act(policy, key, t, obs)
            action = np.asarray(action)
            with jax.profiler.TraceAnnotation("env_step"):
                next_obs, reward, term, trunc, info = envs.step(action)
            true_next = next_obs
            if "final_obs" in info and (term | trunc).any():
                true_next = next_obs.copy()
                for i in np.flatnonzero(term | trunc):
                    true_next[i] = info["final_obs"][i]
            for k, v in (
                ("obs", obs),
                ("action", action),
                ("log_prob", extras["log_prob"]),
                ("value", extras["value"]),
                ("reward", reward),
                ("next_obs", true_next),
                ("terminated", term),
                ("truncated", trunc),
            ):
                cols[k].append(v)
            obs = next_obs
        state["obs"] = obs
        traj = {k: np.stack([np.asarray(x) for x in v]) for k, v in cols.items()}
        traj["obs"] = traj["obs"].astype(np.float32)
        traj["next_obs"] = traj["next_obs"].astype(np.float32)
        traj["reward"] = traj["reward"].astype(np.float32)
        return learn(runner.params, runner.opt_state, traj, key)

    def check(out):
        _, loss = out
        loss = np.asarray(loss)
        return None if np.isfinite(loss).all() else f"non-finite loss {loss}"

    return Case(
        label="gym_sync",
        kind="on-policy",
        fn=iteration,
        steps_per_iteration=args.num_envs * args.num_steps,
        check=check,
        notes=f"gymnasium {gym.__version__} SyncVectorEnv; jitted policy call per step",
    )


# ------------------------------------------------------------------------- any agent at its preset
def agent_case(args, name: str, env_id: str | None = None, **overrides) -> Case:
    """One update of `agents.train`'s algorithm `name` at its preset for the environment
    (`overrides` on top), from a runner past `learning_starts`, so replay agents learn in it."""
    from agents.algorithms import ALGORITHMS, agent_type
    from agents.presets import config_for

    if name not in ALGORITHMS:
        raise Skipped(f"no agent {name!r} in agents/ (it has {list(ALGORITHMS)})")
    env_id = env_id or args.env
    config = config_for(env_id, name, **overrides)
    agent = agent_type(name)(config, jaxsim.make(env_id))
    run = agent.jit_run(1, vmapped=False)
    runner = jax.jit(agent.init)(jax.random.key(args.seed))
    # Warm-up with the very function profiled (no second compile), until gradient steps run.
    warmup = math.ceil(getattr(config, "learning_starts", 0) / config.steps_per_update)
    for _ in range(warmup):
        runner, _ = run(runner)

    def check(out) -> str | None:
        leaves = [np.asarray(x) for x in jax.tree.leaves(out[1].loss)]
        if not all(np.isfinite(x).all() for x in leaves):
            return f"non-finite {name} loss metrics"
        if warmup and not any(np.abs(x).sum() > 0 for x in leaves):
            return f"{name} took no gradient step in the profiled update"
        return None

    grad_steps = getattr(config, "gradient_steps", None) or (
        config.update_epochs * config.num_minibatches
    )
    return Case(
        label=f"{name}_{env_id}",
        kind="on-policy" if name == "ppo" else "off-policy",
        fn=lambda: run(runner),
        steps_per_iteration=config.steps_per_update,
        check=check,
        phases=(*DEFAULT_PHASES, *OFF_POLICY_PHASES),
        notes=f"one update at the {env_id} preset: {config.steps_per_update} env steps, "
        f"{grad_steps} gradient steps",
    )
