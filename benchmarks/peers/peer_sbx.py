"""SBX (Stable-Baselines Jax, package `sbx-rl`) PPO, DQN or SAC on a Gymnasium environment, one
seed, run in the sbx peer venv as a whole process; prints one JSON result as its last line.

Runs under the peer venv's python (`benchmarks/peers/setup_envs.sh sbx`), never jaxsim's: SBX
needs stable-baselines3 and torch, so it imports only sbx, stable_baselines3, gymnasium, jax and
numpy, never this repository. Settings: `--settings`, rl-baselines3-zoo's for the pair (its
hyperparams/*.yml, which rl-zoo also uses for SBX's algorithms) as the SB3 baselines hold them
(`benchmarks.baselines.offpolicy_sb3.RL_ZOO`, passed by `sbx_case.sbx_args`), its budget the
zoo's `n_timesteps`.

Stop rule, as `agents.loop.confirmed`: every `--eval-every` env steps a deterministic evaluation
of `--episodes` episodes (the stop check, env seeded 10_000 + seed); one at the target is
confirmed by an independent deterministic evaluation of 32 episodes (envs seeded 20_000 + seed,
`benchmarks.harness.solved.CONFIRM_SEED_OFFSET`), and training stops only if both reach it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

T0 = time.perf_counter()

import gymnasium as gym  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
import sbx  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.evaluation import evaluate_policy  # noqa: E402

IMPORT_S = time.perf_counter() - T0

MIN_EPISODES = 32  # as agents.loop.MIN_EPISODES: episodes of the confirming evaluation
CHECK_SEED_OFFSET, CONFIRM_SEED_OFFSET = 10_000, 20_000  # as benchmarks.harness.solved


def _load() -> float:
    return os.getloadavg()[0]


def _value(v):
    if isinstance(v, list) and v[0] == "lin":  # ["lin", x]: linear decay from x to 0
        scale = v[1]
        return lambda progress_remaining: progress_remaining * scale
    return v


def make_model(algorithm: str, env_id: str, seed: int, settings: dict):
    """SBX's `algorithm` ("MlpPolicy") at `settings` on `make_vec_env(env_id, n_envs)`."""
    h = dict(settings)
    env = make_vec_env(env_id, n_envs=h.pop("n_envs"), seed=seed)
    h.pop("n_timesteps")
    kwargs = {k: _value(v) for k, v in h.items()}
    if "net_arch" in kwargs:
        kwargs["policy_kwargs"] = dict(net_arch=kwargs.pop("net_arch"))
    cls = {"ppo": sbx.PPO, "dqn": sbx.DQN, "sac": sbx.SAC}[algorithm]
    return cls("MlpPolicy", env, seed=seed, verbose=0, **kwargs)


class EvalUntilReturn(BaseCallback):
    """The stop check every `every` env steps, confirmed as the module docstring says."""

    def __init__(self, env_id: str, seed: int, every: int, episodes: int, target: float, t0):
        super().__init__()
        self.check_env = make_vec_env(env_id, n_envs=1, seed=CHECK_SEED_OFFSET + seed)
        self.confirm_env = make_vec_env(env_id, n_envs=1, seed=CONFIRM_SEED_OFFSET + seed)
        self.every, self.episodes, self.target, self.t0 = every, episodes, target, t0
        self.next, self.eval_s, self.curve, self.at = every, 0.0, [], None

    def _on_step(self) -> bool:
        if self.num_timesteps < self.next:
            return True
        self.next += self.every
        t = time.perf_counter()
        mean, _ = evaluate_policy(self.model, self.check_env, self.episodes, deterministic=True)
        point = {"step": int(self.num_timesteps), "mean_return": float(mean)}
        if mean >= self.target:
            returns, _ = evaluate_policy(
                self.model,
                self.confirm_env,
                MIN_EPISODES,
                deterministic=True,
                return_episode_rewards=True,
            )
            point["confirm_return"] = float(np.mean(returns))
            point["confirm_episodes"] = len(returns)
            point["solved"] = bool(np.mean(returns) >= self.target)
        now = time.perf_counter()
        self.eval_s += now - t
        point.update(wall_s=now - self.t0, train_wall_s=now - self.t0 - self.eval_s, load=_load())
        self.curve.append(point)
        if point.get("solved"):
            self.at = point
            return False
        return True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("algorithm", choices=("ppo", "dqn", "sac"))
    p.add_argument("--env", required=True, help="a Gymnasium id")
    p.add_argument("--settings", type=json.loads, required=True, help="rl-zoo's, as JSON")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target", type=float, required=True)
    p.add_argument("--eval-every", type=int, required=True, help="env steps between checks")
    p.add_argument("--episodes", type=int, default=32, help="episodes per stop check")
    p.add_argument("--total-timesteps", type=int, default=None, help="budget (rl-zoo's)")
    a = p.parse_args()
    load_before = _load()
    t0 = time.perf_counter()
    model = make_model(a.algorithm, a.env, a.seed, a.settings)
    callback = EvalUntilReturn(a.env, a.seed, a.eval_every, a.episodes, a.target, t0)
    budget = a.total_timesteps or a.settings["n_timesteps"]
    model.learn(total_timesteps=budget, callback=callback)
    at = callback.at
    out = {
        "algorithm": a.algorithm,
        "env": a.env,
        "seed": a.seed,
        "target": a.target,
        "solved": at is not None,
        "steps_to_target": None if at is None else at["step"],
        "train_wall_s_to_target": None if at is None else at["train_wall_s"],
        "steps_done": int(model.num_timesteps),
        "check_wall_s": callback.eval_s,
        "rejected_checks": [pt for pt in callback.curve if pt.get("solved") is False],
        "curve": callback.curve,
        "eval_every": a.eval_every,
        "check_episodes": a.episodes,
        "confirm_episodes": MIN_EPISODES,
        "hyperparameters": {k: repr(v) for k, v in a.settings.items()},
        "hyperparameters_source": "rl-baselines3-zoo hyperparams/*.yml",
        "budget": budget,
        "load_before": load_before,
        "load_after": _load(),
        "import_s": IMPORT_S,
        "process_wall_s": time.perf_counter() - T0,
        "versions": {
            "sbx": sbx.__version__,
            "jax": jax.__version__,
            "gymnasium": gym.__version__,
            "python": sys.version.split()[0],
        },
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
