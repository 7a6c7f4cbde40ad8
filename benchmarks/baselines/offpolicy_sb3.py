"""Stable-Baselines3 beside jaxsim's off-policy agents: rl-zoo's models, training to a return, and
the simulation share of SB3's PPO, DQN and SAC stepping Gymnasium's CPU environments.

SB3 and torch are optional (`pip install -e ".[baselines]"`); every entry point here imports
them lazily, and `sb3_missing()` says why they cannot run.

What counts as simulation in a Gymnasium loop (`simulation_share`): the seconds SB3's training
loop spends inside its VecEnv's `reset`, `step_async` and `step_wait`, that is Gymnasium's
`env.step` / `env.reset` (with `gymnasium.make`'s TimeLimit, order-enforcing and checker
wrappers) plus SB3's `Monitor` and `DummyVecEnv` bookkeeping (auto-reset, observation buffer
copies, info dicts). The seconds inside `gymnasium.make`'s env alone are recorded beside it
("env_step" share). Everything else in `learn()` (policy inference in torch, the replay or
rollout buffer, gradient steps, SB3's Python) is not simulation.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from agents.loop import MIN_EPISODES
from benchmarks.baselines.ppo_sb3 import (
    SB3_CARTPOLE,
    eval_until_return,
    sb3_cartpole_ppo,
    sb3_missing,
    sb3_versions,
)
from benchmarks.harness.solved import CONFIRM_SEED_OFFSET, first_solved, rejected_in

# rl-baselines3-zoo hyperparameters (github.com/DLR-RM/rl-baselines3-zoo), by (algorithm, env).
# SB3's defaults fill what a file leaves out; n_timesteps is rl-zoo's training budget.
RL_ZOO: dict[tuple[str, str], dict[str, Any]] = {
    # hyperparams/ppo.yml CartPole-v1 ("Tuned"; lin_x: linear decay from x to 0), shared with
    # benchmarks.baselines.ppo_sb3.
    ("ppo", "CartPole-v1"): SB3_CARTPOLE,
    # hyperparams/ppo.yml Pendulum-v1 ("Tuned"; batch_size: SB3's default 64).
    ("ppo", "Pendulum-v1"): dict(
        n_envs=4,
        n_timesteps=100_000,
        n_steps=1024,
        gae_lambda=0.95,
        gamma=0.9,
        n_epochs=10,
        ent_coef=0.0,
        learning_rate=1e-3,
        clip_range=0.2,
        use_sde=True,
        sde_sample_freq=4,
    ),
    # hyperparams/dqn.yml CartPole-v1 ("Almost Tuned"); one environment (rl-zoo's n_envs default).
    ("dqn", "CartPole-v1"): dict(
        n_envs=1,
        n_timesteps=50_000,
        learning_rate=2.3e-3,
        batch_size=64,
        buffer_size=100_000,
        learning_starts=1000,
        gamma=0.99,
        target_update_interval=10,
        train_freq=256,
        gradient_steps=128,
        exploration_fraction=0.16,
        exploration_final_eps=0.04,
        net_arch=[256, 256],
    ),
    # hyperparams/sac.yml Pendulum-v1: only the budget and the learning rate; SB3's SAC defaults
    # (buffer 1e6, learning_starts 100, batch 256, tau 0.005, gamma 0.99, train_freq 1,
    # gradient_steps 1, ent_coef "auto", net [256, 256]) for the rest.
    ("sac", "Pendulum-v1"): dict(n_envs=1, n_timesteps=20_000, learning_rate=1e-3),
}
SIMULATION = (
    "seconds inside the VecEnv's reset/step_async/step_wait (Gymnasium's env.step and reset with "
    "gymnasium.make's wrappers, plus SB3's Monitor and DummyVecEnv bookkeeping) over the seconds "
    "of learn(), past a warm-up learn() that fills the replay buffer to learning_starts"
)


def make_model(algorithm: str, env, seed: int):
    """SB3's `algorithm` ("MlpPolicy", on the CPU) with rl-zoo's settings for `env`'s id, on the
    VecEnv `env` (see `make_env`)."""
    from stable_baselines3 import DQN, PPO, SAC

    env_id = env.get_attr("spec")[0].id
    if (algorithm, env_id) not in RL_ZOO:
        raise ValueError(f"no rl-zoo settings for {algorithm} on {env_id}; known: {list(RL_ZOO)}")
    if (algorithm, env_id) == ("ppo", "CartPole-v1"):
        return sb3_cartpole_ppo(env, seed)
    h = {k: v for k, v in RL_ZOO[algorithm, env_id].items() if k not in ("n_envs", "n_timesteps")}
    kwargs = dict(seed=seed, device="cpu", verbose=0)
    if "net_arch" in h:
        kwargs["policy_kwargs"] = dict(net_arch=h.pop("net_arch"))
    cls = {"ppo": PPO, "dqn": DQN, "sac": SAC}[algorithm]
    return cls("MlpPolicy", env, **h, **kwargs)


def make_env(env_id: str, n_envs: int, seed: int, clock: dict[str, float] | None = None):
    """SB3's usual `make_vec_env(env_id, n_envs)`: a DummyVecEnv of Gymnasium envs, each under
    Monitor. With `clock`, the seconds in each `gymnasium.make` env's step/reset add up in
    clock["env_step"] and the VecEnv's reset/step_async/step_wait in clock["vec_env"]."""
    import gymnasium as gym
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecEnvWrapper

    if clock is None:
        return make_vec_env(env_id, n_envs=n_envs, seed=seed)

    class EnvClock(gym.Wrapper):
        def step(self, action):
            t0 = time.perf_counter()
            out = self.env.step(action)
            clock["env_step"] += time.perf_counter() - t0
            return out

        def reset(self, **kwargs):
            t0 = time.perf_counter()
            out = self.env.reset(**kwargs)
            clock["env_step"] += time.perf_counter() - t0
            return out

    class VecClock(VecEnvWrapper):
        def reset(self):
            t0 = time.perf_counter()
            out = self.venv.reset()
            clock["vec_env"] += time.perf_counter() - t0
            return out

        def step_async(self, actions):
            t0 = time.perf_counter()
            self.venv.step_async(actions)
            clock["vec_env"] += time.perf_counter() - t0

        def step_wait(self):
            t0 = time.perf_counter()
            out = self.venv.step_wait()
            clock["vec_env"] += time.perf_counter() - t0
            return out

    venv = make_vec_env(lambda: EnvClock(gym.make(env_id)), n_envs=n_envs, seed=seed)
    return VecClock(venv)


# ------------------------------------------------------------------------- simulation share
def simulation_share(algorithm: str, env_id: str, steps: int, rounds: int, seed: int = 0) -> dict:
    """SB3's `algorithm` at rl-zoo's settings on Gymnasium's `env_id`: after a warm-up `learn`
    (one rollout for PPO; past learning_starts for DQN/SAC, so gradient steps run), `rounds`
    timed `learn(steps)` calls, each timed whole and split by `make_env`'s clocks. The shares
    are medians over the rounds."""
    h = RL_ZOO[algorithm, env_id]
    clock = {"vec_env": 0.0, "env_step": 0.0}
    model = make_model(algorithm, make_env(env_id, h["n_envs"], seed, clock), seed)
    warmup = h["n_envs"] * h.get("n_steps", 0) or model.learning_starts + model.train_freq.frequency
    model.learn(warmup)
    samples = []
    for _ in range(rounds):
        clock.update(vec_env=0.0, env_step=0.0)
        done = model.num_timesteps
        t0 = time.perf_counter()
        model.learn(steps, reset_num_timesteps=False)
        wall = time.perf_counter() - t0
        samples.append(
            {
                "wall_s": wall,
                "steps": model.num_timesteps - done,
                "vec_env_s": clock["vec_env"],
                "env_step_s": clock["env_step"],
            }
        )
    vec = statistics.median(s["vec_env_s"] / s["wall_s"] for s in samples)
    env_only = statistics.median(s["env_step_s"] / s["wall_s"] for s in samples)
    per_env_step = h.get("gradient_steps", 1) / h.get("train_freq", 1)
    if algorithm == "ppo":
        n_steps = h["n_steps"] * h["n_envs"]
        per_env_step = h["n_epochs"] * -(-n_steps // h.get("batch_size", 64)) / n_steps
    return {
        "algorithm": algorithm,
        "env": env_id,
        "case": f"sb3_{algorithm}_{env_id}",
        "status": "ok",
        "kind": "on-policy" if algorithm == "ppo" else "off-policy",
        "hyperparameters": f"rl-baselines3-zoo {algorithm}.yml {env_id}",
        "gradient_steps_per_env_step": per_env_step,
        "warmup_steps": warmup,
        "rounds": rounds,
        "samples": samples,
        "wall_s": statistics.median(s["wall_s"] for s in samples),
        "steps_per_s": statistics.median(s["steps"] / s["wall_s"] for s in samples),
        "category_shares": {"simulation": vec},
        "env_step_share": env_only,
        "torch_threads": _torch_threads(),
    }


def gymnasium_loops(
    pairs: dict[str, tuple[str, str]], steps: dict[str, int], rounds: int, threads: int
) -> dict:
    """`simulation_share` of every algorithm in `pairs` ({env: (on-policy, off-policy)}) and
    each pair's ratio, as `benchmarks.offpolicy.compare` makes them, for both measures; torch
    on `threads` threads (see `set_torch_threads`)."""
    missing = sb3_missing()
    if missing:
        return {"measured": False, "reason": missing}
    set_torch_threads(threads)
    results = []
    for env_id, algorithms in pairs.items():
        for algorithm in algorithms:
            print(f"[offpolicy] sb3_{algorithm}_{env_id} (Gymnasium loop) ...", flush=True)
            results.append(simulation_share(algorithm, env_id, steps[algorithm], rounds))
    by = {(r["algorithm"], r["env"]): r for r in results}
    comparison = []
    for env_id, (on, off) in pairs.items():
        row = {"env": env_id, "on_policy": on, "off_policy": off}
        for name, share in (("", lambda r: r["category_shares"]["simulation"]),
                            ("env_step_", lambda r: r["env_step_share"])):  # fmt: skip
            on_share, off_share = share(by[on, env_id]), share(by[off, env_id])
            row[f"{name}on_policy_simulation_share"] = on_share
            row[f"{name}off_policy_simulation_share"] = off_share
            row[f"{name}ratio"] = on_share / off_share if off_share > 0 else None
        comparison.append(row)
    return {
        "measured": True,
        "library": sb3_versions(),
        "simulation": SIMULATION,
        "results": results,
        "comparison": comparison,
    }


# --------------------------------------------------------------------------- time to a return
def learn_to_return(
    algorithm: str, env_id: str, seed: int, target: float, eval_every: int, episodes: int
) -> dict:
    """SB3's `algorithm` trained (rl-zoo settings and budget) with an EvalCallback-style
    deterministic evaluation of `episodes` episodes every `eval_every` env steps, stopping once
    one reaches `target` and an independent deterministic evaluation confirms it
    (`agents.loop.MIN_EPISODES` episodes on an env seeded apart: `eval_until_return`).
    Evaluation time (wall and CPU, both evaluations) is taken out of the training times."""
    import gymnasium as gym
    from stable_baselines3.common.monitor import Monitor

    h = RL_ZOO[algorithm, env_id]
    t_start, cpu_start = time.perf_counter(), time.process_time()
    model = make_model(algorithm, make_env(env_id, h["n_envs"], seed), seed)
    eval_env = Monitor(gym.make(env_id))
    eval_env.reset(seed=10_000 + seed)
    confirm_env = Monitor(gym.make(env_id))
    confirm_env.reset(seed=CONFIRM_SEED_OFFSET + seed)
    started = (t_start, cpu_start)
    callback = eval_until_return(eval_env, eval_every, episodes, target, started, confirm_env)
    model.learn(total_timesteps=h["n_timesteps"], callback=callback)
    state = callback.state
    train_wall = time.perf_counter() - t_start - state["eval_s"]
    curve = state["curve"]
    reached = first_solved(curve)
    best = max(curve, key=lambda p: p["mean_return"]) if curve else None
    return {
        "seed": seed,
        "loadavg_1min_after": os.getloadavg()[0],
        "torch_threads": _torch_threads(),
        # Solved by the rule: its check and the independent evaluation reached the target.
        "reached": reached is not None,
        "confirm_return": None if reached is None else reached["confirm_return"],
        "confirm_episodes": MIN_EPISODES,
        "rejected_checks": rejected_in(curve, seed),
        "steps_to_return": None if reached is None else reached["step"],
        "train_wall_s_to_return": None if reached is None else reached["train_wall_s"],
        "train_cpu_s_to_return": None if reached is None else reached["train_cpu_s"],
        "best_return": None if best is None else best["mean_return"],
        "best_step": None if best is None else best["step"],
        "train_wall_s_to_best": None if best is None else best["train_wall_s"],
        "steps_done": int(model.num_timesteps),
        "train_wall_s_total": train_wall,
        "sps_whole_loop": model.num_timesteps / train_wall,
        "curve": curve,
    }


def set_torch_threads(threads: int) -> int:
    """Sets torch's intra-op threads if `threads` > 0 (0: torch's default); returns the count.
    On a 2-core machine shared with other jobs torch's default (2 OpenMP threads) collapsed:
    SB3 PPO on CartPole ran 40x slower than with 1 thread (24 s against 0.6 s for 1024 steps,
    load average 10), so the benchmarks default to 1 and record what they used."""
    import torch

    if threads > 0:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def _torch_threads() -> int:
    return set_torch_threads(0)
