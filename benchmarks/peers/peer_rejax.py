"""rejax's PPO or DQN on gymnax CartPole-v1 (or PPO on Breakout-MinAtar), run in the rejax peer
venv; prints one JSON line.

Runs under the peer venv's python (`benchmarks/peers/setup_envs.sh rejax`): rejax 0.1.3 needs
gymnax 0.0.9 (its evaluation unpacks a 5-value step), jaxsim pins gymnax 1.x. It imports only
rejax, gymnax, jax and numpy, never this repository.

rejax's published settings (its configs/gymnax/cartpole.yaml) train every seed at once
(`jit(vmap(...))`), in chunks of rejax's own `eval_freq` env steps: a chunk is what rejax's
`train` scans between its evaluations (`train_iteration` in a fori_loop), its evaluation left
out. After each chunk, outside the timed training, a deterministic evaluation (greedy
actions, 32 episodes) is the stop check; a seed at the target is confirmed by an independent
deterministic evaluation (64 episodes, keys apart from the check's), the rule of
agents.loop.confirmed. The run stops when every seed is confirmed or rejax's budget ends.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

T0 = time.perf_counter()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import rejax  # noqa: E402
from rejax.evaluate import evaluate  # noqa: E402

IMPORT_S = time.perf_counter() - T0

# rejax's configs/gymnax/cartpole.yaml (its repository), as published.
PUBLISHED = {
    "ppo": dict(
        env="CartPole-v1",
        agent_kwargs={"activation": "tanh"},
        num_envs=5,
        num_steps=100,
        num_epochs=5,
        num_minibatches=5,
        learning_rate=0.00075,
        max_grad_norm=0.5,
        total_timesteps=100_000,
        eval_freq=1000,
        gamma=0.99,
        gae_lambda=0.95,
        clip_eps=0.2,
        ent_coef=0.01,
        vf_coef=0.5,
    ),
    "dqn": dict(
        env="CartPole-v1",
        agent="DuelingQNetwork",
        agent_kwargs={"activation": "swish"},
        num_envs=10,
        buffer_size=50_000,
        fill_buffer=5_000,
        batch_size=100,
        max_grad_norm=10,
        learning_rate=0.001,
        num_epochs=5,
        total_timesteps=100_000,
        eval_freq=2_500,
        polyak=0.98,
        eps_start=1,
        eps_end=0.05,
        exploration_fraction=0.5,
        gamma=0.99,
        ddqn=True,
        normalize_observations=False,
    ),
}
# Breakout-MinAtar: rejax 0.1.3 as installed ships no configs folder (no MinAtar config); its
# README's Breakout-MinAtar benchmark (img/speedup_minatar.png) says "the hyperparameters were set
# to the default values of cleanRL": cleanRL's ppo.py defaults (4 envs x 128 steps, 4 epochs of
# 4 minibatches, lr 2.5e-4, clip 0.2, ent 0.01, vf 0.5, grad norm 0.5, 500k steps, a 64-64 tanh
# MLP) in rejax's fields. rejax has no lr annealing (cleanRL anneals) and no clipped value loss
# switch; eval_freq (the stop check's period here) is 16 iterations. No DQN: the README names no
# MinAtar DQN settings beyond "cleanRL's defaults", which are CartPole's.
BREAKOUT = {
    "ppo": dict(
        env="Breakout-MinAtar",
        agent_kwargs={"activation": "tanh"},
        num_envs=4,
        num_steps=128,
        num_epochs=4,
        num_minibatches=4,
        learning_rate=0.00025,
        max_grad_norm=0.5,
        total_timesteps=500_000,
        eval_freq=8192,
        gamma=0.99,
        gae_lambda=0.95,
        clip_eps=0.2,
        ent_coef=0.01,
        vf_coef=0.5,
    ),
}
SETTINGS = {"CartPole-v1": PUBLISHED, "Breakout-MinAtar": BREAKOUT}
CHECK_EPISODES, CONFIRM_EPISODES = 32, 64  # CONFIRM >= agents.loop.MIN_EPISODES


def greedy_act(algo, name: str, ts):
    """rejax's `make_act` without its exploration: the mode of PPO's policy, DQN at epsilon 0."""

    def act(obs, rng):
        if getattr(algo, "normalize_observations", False):
            obs = algo.normalize_obs(ts.obs_rms_state, obs)
        obs = jnp.expand_dims(obs, 0)
        if name == "ppo":
            mode = algo.actor.apply(
                ts.actor_ts.params, obs, method=lambda m, o: m._action_dist(o).mode()
            )
        else:
            mode = algo.agent.apply(ts.q_ts.params, obs, rng, epsilon=0.0, method="act")
        return jnp.squeeze(mode)

    return act


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("algorithm", choices=sorted(PUBLISHED))
    p.add_argument("--env", choices=sorted(SETTINGS), default="CartPole-v1")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--target", type=float, default=475.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--total-timesteps", type=int, default=None, help="budget (published)")
    p.add_argument("--sweep", default=None, help="LRS;ENT_COEFS: a PPO sweep, the whole budget")
    a = p.parse_args()
    if a.sweep:
        return sweep(a)
    load_before = os.getloadavg()[0]
    if a.algorithm not in SETTINGS[a.env]:
        p.error(f"no published rejax {a.algorithm} settings for {a.env}")
    published = SETTINGS[a.env][a.algorithm]
    config = dict(published)
    budget = a.total_timesteps or config["total_timesteps"]
    chunk_steps = config["eval_freq"]
    # rejax's schedules (DQN's epsilon) read total_timesteps: it stays the budget, and a chunk is
    # what rejax's train scans once per evaluation: eval_freq env steps of train_iteration.
    config.update(total_timesteps=budget)
    algo = rejax.get_algo(a.algorithm).create(**config)
    per_iteration = algo.num_envs * getattr(algo, "num_steps", 1)
    iterations = -(-chunk_steps // per_iteration)

    def train_chunk(ts):
        return jax.lax.fori_loop(0, iterations, lambda _, t: algo.train_iteration(t), ts)

    def check(ts, key, episodes):
        _, returns = evaluate(
            greedy_act(algo, a.algorithm, ts),
            key,
            algo.env,
            algo.env_params,
            episodes,
            algo.env_params.max_steps_in_episode,
        )
        return returns

    keys = jax.random.split(jax.random.PRNGKey(a.seed), a.seeds)
    check_fn = jax.jit(jax.vmap(check, in_axes=(0, 0, None)), static_argnums=2)
    t_start = time.perf_counter()
    ts = jax.block_until_ready(jax.jit(jax.vmap(algo.init_state))(keys))
    init_s = time.perf_counter() - t_start  # its compile in; not in train_wall_s
    train = jax.jit(jax.vmap(train_chunk))
    train_s, first_chunk_s, steps, curve = 0.0, None, 0, []
    solved_at: list[dict | None] = [None] * a.seeds
    while steps < budget and not all(solved_at):
        t = time.perf_counter()
        ts = jax.block_until_ready(train(ts))
        took = time.perf_counter() - t
        first_chunk_s = took if first_chunk_s is None else first_chunk_s
        train_s += took
        steps += chunk_steps
        check_keys = jax.random.split(jax.random.PRNGKey(10_000 + steps), a.seeds)
        returns = np.asarray(check_fn(ts, check_keys, CHECK_EPISODES)).mean(axis=1)
        point = {
            "step": steps,
            "eval_return": returns.tolist(),
            "train_wall_s": train_s,
            "wall_s": time.perf_counter() - t_start,
            "load": os.getloadavg()[0],
        }
        if any(r >= a.target and s is None for r, s in zip(returns, solved_at, strict=True)):
            confirm_keys = jax.random.split(jax.random.PRNGKey(20_000 + steps), a.seeds)
            independent = np.asarray(check_fn(ts, confirm_keys, CONFIRM_EPISODES)).mean(axis=1)
            point["confirm_return"] = independent.tolist()
            for s in range(a.seeds):
                if solved_at[s] is None and returns[s] >= a.target <= independent[s]:
                    solved_at[s] = {"step": steps, "train_wall_s": train_s}
        curve.append(point)
    print(
        json.dumps(
            {
                "algorithm": a.algorithm,
                "env": f"gymnax {a.env}",
                "seeds": a.seeds,
                "target": a.target,
                "hyperparameters": published,
                "budget_steps": budget,
                "chunk_steps": chunk_steps,
                "solved": [s is not None for s in solved_at],
                "solved_at": solved_at,
                "train_wall_s": train_s,
                "first_chunk_s": first_chunk_s,
                "init_s": init_s,
                "curve": curve,
                "load_before": load_before,
                "load_after": os.getloadavg()[0],
                "import_s": IMPORT_S,
                "process_wall_s": time.perf_counter() - T0,
                "versions": {
                    "jax": jax.__version__,
                    "rejax": _version("rejax"),
                    "gymnax": _version("gymnax"),
                    "python": sys.version.split()[0],
                },
            }
        )
    )


def sweep(a) -> None:
    """rejax's PPO over a grid of learning rates x entropy coefficients x seeds, one jit(vmap)
    (its hyperparameters are pytree fields, replaced under vmap), each run its whole budget, then
    rejax's own final evaluation (greedy, 128 episodes); prints one JSON line."""
    lrs, ents = ([float(v) for v in part.split(",")] for part in a.sweep.split(";"))
    budget = a.total_timesteps or PUBLISHED["ppo"]["total_timesteps"]
    config = dict(PUBLISHED["ppo"], total_timesteps=budget, eval_freq=budget)
    algo = rejax.get_algo("ppo").create(**config, skip_initial_evaluation=True)
    grid_lr = jnp.repeat(jnp.asarray(lrs), len(ents))  # learning rate slowest, as agents' sweep
    grid_ent = jnp.tile(jnp.asarray(ents), len(lrs))

    def train(lr, ent, key):
        return algo.replace(learning_rate=lr, ent_coef=ent).train(key)

    keys = jax.random.split(jax.random.PRNGKey(a.seed), a.seeds)
    per_seed = jax.vmap(train, in_axes=(None, None, 0))
    t = time.perf_counter()
    _, (_, returns) = jax.block_until_ready(
        jax.jit(jax.vmap(per_seed, in_axes=(0, 0, None)))(grid_lr, grid_ent, keys)
    )
    train_s = time.perf_counter() - t  # compile included: one program, called once
    final = np.asarray(returns)[:, :, -1].mean(axis=-1)  # [config, seed, eval, episode] -> last
    print(
        json.dumps(
            {
                "algorithm": "ppo",
                "hyperparameters": config,
                "grid": {"learning_rate": lrs, "ent_coef": ents},
                "seeds": a.seeds,
                "final_eval": final.tolist(),
                "compile_and_train_s": train_s,
                "import_s": IMPORT_S,
                "process_wall_s": time.perf_counter() - T0,
                "versions": {"jax": jax.__version__, "rejax": _version("rejax")},
            }
        )
    )


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


if __name__ == "__main__":
    main()
