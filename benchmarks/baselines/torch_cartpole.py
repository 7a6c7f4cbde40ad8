"""Baselines beside jaxsim: an eager-PyTorch CartPole, and the checks that every one steps alike.

`TorchCartPole` is vectorized CartPole-v1 written the way a PyTorch user writes it: one
[num_envs, 4] tensor, Gymnasium's equations as eager tensor ops, same-step auto-reset. It is the
"DNN-framework implementation" of arXiv 2207.07736, which measured an XLA implementation 13.4x
faster by cutting Python-to-backend calls.

The dynamics checks step each implementation from the same states with the same actions as
jaxsim's `env.step` and compare every transition (`reference_transitions` draws them). EnvPool
cannot be put into a given state, so it is checked statistically (`statistics_check`).
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxsim
from benchmarks.harness.optional import Skipped, require

# jaxsim's physical state fields per environment, in the order Gymnasium keeps its `state`.
STATE_FIELDS = {
    "CartPole-v1": ("x", "x_dot", "theta", "theta_dot"),
    "Pendulum-v1": ("theta", "theta_dot"),
    "MountainCar-v0": ("position", "velocity"),
    "MountainCarContinuous-v0": ("position", "velocity"),
    "Acrobot-v1": ("theta1", "theta2", "dtheta1", "dtheta2"),
}
# gymnax's names for the same fields, in the same order.
GYMNAX_FIELDS = {
    "CartPole-v1": ("x", "x_dot", "theta", "theta_dot"),
    "Pendulum-v1": ("theta", "theta_dot"),
    "MountainCar-v0": ("position", "velocity"),
    "MountainCarContinuous-v0": ("position", "velocity"),
    "Acrobot-v1": ("joint_angle1", "joint_angle2", "velocity_1", "velocity_2"),
}
# float32 (jaxsim) against float64 (Gymnasium) one step apart: |a - b| <= ATOL + RTOL * |b|.
ATOL, RTOL = 1e-5, 1e-5


# ------------------------------------------------------------------------ reference transitions
@dataclasses.dataclass
class Transitions:
    """jaxsim's `env.step` from `states` under `actions`; numpy leaves [steps, num_envs, ...]."""

    env_id: str
    states: np.ndarray  # [steps, num_envs, len(STATE_FIELDS)] float32, physical fields only
    actions: np.ndarray  # [steps, num_envs] int32 or [steps, num_envs, 1] float32
    next_obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    valid: np.ndarray  # [steps, num_envs]: the state is one an episode reaches (not past its end)

    @property
    def count(self) -> int:
        return int(self.valid.sum())


def reference_transitions(env_id: str, num_envs: int = 64, steps: int = 20) -> Transitions:
    """States visited by random actions from resets, and jaxsim's step from each.

    Environments are not reset: transitions from a state past its episode's end are marked
    invalid (implementations may differ there, e.g. gymnax pays no reward after the end).
    """
    env = jaxsim.make(env_id)
    params = env.default_params
    policy = jaxsim.random_policy(env)
    keys = jax.random.split(jax.random.key(7), num_envs)
    state, obs = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
    cols: dict[str, list] = {k: [] for k in ("states", "actions", "next_obs", "reward", "term")}
    alive, valid = np.ones(num_envs, bool), []
    for t in range(steps):
        action = policy(jax.random.key(100 + t), obs)
        cols["states"].append(np.stack([getattr(state, f) for f in STATE_FIELDS[env_id]], -1))
        state, ts = step(keys, state, action, params)
        # A fresh step count each time: the time limit is not what is compared.
        state = state.replace(time=jnp.zeros_like(state.time))
        obs = ts.obs
        for name, x in (("actions", action), ("next_obs", ts.obs), ("reward", ts.reward)):
            cols[name].append(np.asarray(x))
        cols["term"].append(np.asarray(ts.terminated))
        valid.append(alive.copy())
        alive &= ~np.asarray(ts.terminated)
    return Transitions(
        env_id,
        np.asarray(cols["states"], np.float32),
        np.asarray(cols["actions"]),
        np.asarray(cols["next_obs"], np.float32),
        np.asarray(cols["reward"], np.float32),
        np.asarray(cols["term"], bool),
        np.asarray(valid, bool),
    )


def compare(ref: Transitions, next_obs, reward, terminated, method: str) -> dict[str, Any]:
    """Every transition of an implementation against jaxsim's: a check record."""
    next_obs, reward = np.asarray(next_obs, np.float64), np.asarray(reward, np.float64)
    terminated = np.asarray(terminated, bool)

    v = ref.valid

    def err(got, want):
        """(max |got - want|, whether every element is within tolerance) over valid steps."""
        got, want = got.reshape(want.shape)[v], want[v]
        diff = np.abs(got - want)
        return float(diff.max(initial=0.0)), bool((diff <= ATOL + RTOL * np.abs(want)).all())

    obs_err, obs_ok = err(next_obs, ref.next_obs)
    reward_err, reward_ok = err(reward, ref.reward)
    mismatches = int((terminated.reshape(ref.terminated.shape) != ref.terminated)[v].sum())
    ok = obs_ok and reward_ok and mismatches == 0
    return {
        "pass": ok,
        "method": method,
        "transitions": ref.count,
        "max_obs_err": obs_err,
        "max_reward_err": reward_err,
        "terminated_mismatches": mismatches,
        "tolerance": f"|a - b| <= {ATOL} + {RTOL} * |b|; terminated identical",
    }


# ------------------------------------------------------------------------- per-implementation
def gymnasium_dynamics_check(env_id: str, ref: Transitions) -> dict[str, Any]:
    """One Gymnasium env (what SyncVectorEnv and AsyncVectorEnv step), set to each state."""
    gym = require("gymnasium")
    env = gym.make(env_id).unwrapped
    env.reset(seed=0)
    out = {"next_obs": [], "reward": [], "terminated": []}
    for t in range(ref.states.shape[0]):
        for i in range(ref.states.shape[1]):
            env.state = ref.states[t, i].astype(np.float64)
            if hasattr(env, "steps_beyond_terminated"):
                env.steps_beyond_terminated = None  # stepping past the end is deliberate here
            action = ref.actions[t, i]
            action = int(action) if action.ndim == 0 else action.astype(np.float32)
            obs, reward, terminated, _, _ = env.step(action)
            out["next_obs"].append(obs)
            out["reward"].append(reward)
            out["terminated"].append(terminated)
    env.close()
    method = "gym.make(env).unwrapped set to each state, one step"
    return compare(ref, np.asarray(out["next_obs"]), out["reward"], out["terminated"], method)


def gymnasium_numpy_dynamics_check(env_id: str, ref: Transitions) -> dict[str, Any]:
    """Gymnasium's numpy-vectorized env (CartPole only), set to each batch of states."""
    gym = require("gymnasium")
    if env_id != "CartPole-v1":
        raise Skipped(f"Gymnasium has a numpy-vectorized {env_id} only for CartPole-v1")
    num_envs = ref.states.shape[1]
    envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point")
    venv = envs.unwrapped
    venv.reset(seed=0)
    out = {"next_obs": [], "reward": [], "terminated": []}
    for t in range(ref.states.shape[0]):
        venv.state = ref.states[t].T.astype(np.float64).copy()
        venv.steps = np.zeros(num_envs, np.int32)
        venv.prev_done = np.zeros(num_envs, bool)
        obs, reward, terminated, _, _ = venv.step(ref.actions[t].astype(np.int64))
        out["next_obs"].append(obs)
        out["reward"].append(reward)
        out["terminated"].append(terminated)
    envs.close()
    method = "CartPoleVectorEnv.state set to each batch of states, one step"
    return compare(ref, np.asarray(out["next_obs"]), out["reward"], out["terminated"], method)


def gymnax_dynamics_check(env_id: str, ref: Transitions) -> dict[str, Any]:
    """gymnax's `step_env` (no auto-reset) from each batch of states."""
    gymnax = require("gymnax")
    genv, gparams = gymnax.make(env_id)
    num_envs = ref.states.shape[1]
    keys = jax.random.split(jax.random.key(0), num_envs)
    _, template = jax.vmap(genv.reset, in_axes=(0, None))(keys, gparams)
    step = jax.jit(jax.vmap(genv.step_env, in_axes=(0, 0, 0, None)))
    out = {"next_obs": [], "reward": [], "terminated": []}
    for t in range(ref.states.shape[0]):
        fields = {
            name: jnp.asarray(ref.states[t, :, j]) for j, name in enumerate(GYMNAX_FIELDS[env_id])
        }
        state = template.replace(time=jnp.zeros_like(template.time), **fields)
        obs, _, reward, done, _ = step(keys, state, jnp.asarray(ref.actions[t]), gparams)
        out["next_obs"].append(np.asarray(obs))
        out["reward"].append(np.asarray(reward))
        out["terminated"].append(np.asarray(done))  # time 0: done means terminated
    method = "gymnax step_env from each batch of states (time 0)"
    return compare(ref, np.asarray(out["next_obs"]), out["reward"], out["terminated"], method)


def torch_dynamics_check(env_id: str, ref: Transitions) -> dict[str, Any]:
    """TorchCartPole's physics from each batch of states."""
    torch = require("torch")
    if env_id != "CartPole-v1":
        raise Skipped(f"the eager PyTorch baseline implements CartPole-v1 only, not {env_id}")
    sim = TorchCartPole(ref.states.shape[1])
    out = {"next_obs": [], "reward": [], "terminated": []}
    with torch.inference_mode():
        for t in range(ref.states.shape[0]):
            state = torch.from_numpy(ref.states[t].copy())
            next_state, terminated = sim.physics(state, torch.from_numpy(ref.actions[t].copy()))
            out["next_obs"].append(next_state.numpy())
            out["reward"].append(np.ones(ref.states.shape[1], np.float32))
            out["terminated"].append(terminated.numpy())
    method = "TorchCartPole.physics from each batch of states"
    return compare(ref, np.asarray(out["next_obs"]), out["reward"], out["terminated"], method)


DYNAMICS_CHECKS = {
    "gymnasium": gymnasium_dynamics_check,
    "gymnasium_numpy": gymnasium_numpy_dynamics_check,
    "gymnax": gymnax_dynamics_check,
    "torch": torch_dynamics_check,
}
# What each check needs: (module, the environments it covers or None for all).
_CHECK_NEEDS = {
    "gymnasium": ("gymnasium", None),
    "gymnasium_numpy": ("gymnasium", ("CartPole-v1",)),
    "gymnax": ("gymnax", None),
    "torch": ("torch", ("CartPole-v1",)),
    "envpool_statistics": ("envpool", None),
}


def check_available(name: str, env_id: str) -> None:
    """Raises Skipped unless dynamics check `name` can run on `env_id` here (cheaply: before
    any reference transitions are drawn)."""
    module, envs = _CHECK_NEEDS[name]
    if envs is not None and env_id not in envs:
        raise Skipped(f"{name} covers {', '.join(envs)} only, not {env_id}")
    require(module)


# ------------------------------------------------------------------------------ statistics check
def jaxsim_statistics(env_id: str, num_envs: int = 128, steps: int = 500) -> dict[str, float]:
    """Random-policy reward per step and finished-episode length of jaxsim (from resets)."""
    env = jaxsim.make(env_id)
    traj = jaxsim.rollout(env, "random", steps, num_envs=num_envs, key=jax.random.key(3))
    _, lengths = traj.finished_episodes()
    return {
        "reward_per_step": float(jnp.mean(traj.reward)),
        "mean_episode_length": float(lengths.mean()) if lengths.size else float("nan"),
        "episodes": int(lengths.size),
        "steps": steps,
    }


def envpool_statistics(env_id: str, num_envs: int = 64, steps: int = 500) -> dict[str, float]:
    """The same figures for EnvPool; its reset steps (elapsed_step 0) are left out."""
    envs = make_envpool(env_id, num_envs)
    envs.reset()
    rng = np.random.default_rng(0)
    reward_sum, counted, lengths = 0.0, 0, []
    for _ in range(steps):
        _, reward, terminated, truncated, info = envs.step(random_actions(envs, rng, num_envs))
        real = info["elapsed_step"] > 0
        reward_sum += float(reward[real].sum())
        counted += int(real.sum())
        lengths.extend(info["elapsed_step"][(terminated | truncated) & real].tolist())
    envs.close()
    return {
        "reward_per_step": reward_sum / max(counted, 1),
        "mean_episode_length": float(np.mean(lengths)) if lengths else float("nan"),
        "episodes": len(lengths),
        "steps": steps,
    }


def make_envpool(env_id: str, num_envs: int):
    """EnvPool's synchronous gymnasium-API vector env (seed 0), or Skipped."""
    envpool = require("envpool")
    with warnings.catch_warnings():  # its Box spaces warn about float64 bounds cast to float32
        warnings.filterwarnings("ignore", message=".*precision lowered.*")
        try:
            return envpool.make(env_id, env_type="gymnasium", num_envs=num_envs, seed=0)
        except Exception as e:  # an id EnvPool does not register
            raise Skipped(f"envpool has no {env_id}: {e}") from None


def statistics_check(reference: dict[str, float], got: dict[str, float]) -> dict[str, Any]:
    """Reward per step within 5% (+0.01) and, with >= 20 episodes each, lengths within 10%."""
    r_ref, r_got = reference["reward_per_step"], got["reward_per_step"]
    ok = abs(r_got - r_ref) <= 0.05 * abs(r_ref) + 0.01
    if min(reference["episodes"], got["episodes"]) >= 20:
        l_ref, l_got = reference["mean_episode_length"], got["mean_episode_length"]
        ok = ok and abs(l_got - l_ref) <= 0.1 * l_ref
    return {
        "pass": bool(ok),
        "method": "random-policy statistics against jaxsim (EnvPool cannot be set to a state)",
        "jaxsim": reference,
        "baseline": got,
        "tolerance": "reward/step within 5% + 0.01; mean episode length within 10%",
    }


def random_actions(envs, rng: np.random.Generator, num_envs: int) -> np.ndarray:
    """Uniform actions for a Gymnasium-style vector env's single action space."""
    space = getattr(envs, "single_action_space", None) or envs.action_space
    if hasattr(space, "n"):
        return rng.integers(0, int(space.n), size=num_envs)
    low = np.broadcast_to(space.low, space.shape)
    high = np.broadcast_to(space.high, space.shape)
    return rng.uniform(low, high, size=(num_envs, *space.shape)).astype(np.float32)


# --------------------------------------------------------------------------- eager-PyTorch CartPole
class TorchCartPole:
    """CartPole-v1 on a batch in eager PyTorch, written as a PyTorch user would write it.

    State is one [num_envs, 4] float32 tensor (x, x_dot, theta, theta_dot); `step` applies
    Gymnasium's explicit-Euler equations as tensor ops and resets finished environments in the
    same step (as jaxsim does), drawing fresh states with a torch.Generator. Every operation is
    its own call from Python into the framework.
    """

    gravity = 9.8
    masscart = 1.0
    masspole = 0.1
    length = 0.5
    force_mag = 10.0
    tau = 0.02
    theta_threshold_radians = 12 * 2 * np.pi / 360
    x_threshold = 2.4
    reset_bound = 0.05
    max_episode_steps = 500

    def __init__(self, num_envs: int, seed: int = 0, device: str = "cpu"):
        import torch

        self.torch = torch
        self.num_envs = num_envs
        self.device = device
        self.generator = torch.Generator(device=device).manual_seed(seed)
        self.total_mass = self.masspole + self.masscart
        self.polemass_length = self.masspole * self.length
        self.state = self._reset_states()
        self.steps = torch.zeros(num_envs, dtype=torch.int32, device=device)

    def _reset_states(self):
        u = self.torch.rand((self.num_envs, 4), generator=self.generator, device=self.device)
        return (2 * u - 1) * self.reset_bound

    def physics(self, state, action):
        """state [B, 4], action [B] (0 or 1) -> (next state [B, 4], terminated [B])."""
        torch = self.torch
        x, x_dot, theta, theta_dot = state.unbind(-1)
        force = torch.where(action == 1, self.force_mag, -self.force_mag)
        costheta, sintheta = torch.cos(theta), torch.sin(theta)
        temp = (force + self.polemass_length * theta_dot**2 * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta**2 / self.total_mass)
        )
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        terminated = (
            (x < -self.x_threshold)
            | (x > self.x_threshold)
            | (theta < -self.theta_threshold_radians)
            | (theta > self.theta_threshold_radians)
        )
        return torch.stack((x, x_dot, theta, theta_dot), dim=-1), terminated

    def random_actions(self):
        return self.torch.randint(
            0, 2, (self.num_envs,), generator=self.generator, device=self.device
        )

    def step(self, action):
        """-> (obs after auto-reset, reward, terminated, truncated, true next obs)."""
        torch = self.torch
        next_state, terminated = self.physics(self.state, action)
        self.steps = self.steps + 1
        truncated = self.steps >= self.max_episode_steps
        done = terminated | truncated
        reward = torch.ones(self.num_envs, device=self.device)
        self.state = torch.where(done.unsqueeze(-1), self._reset_states(), next_state)
        self.steps = torch.where(done, torch.zeros_like(self.steps), self.steps)
        return self.state, reward, terminated, truncated, next_state
