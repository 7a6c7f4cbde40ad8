"""The original `minatar` package beside jaxsim's SpaceInvaders and Seaquest: its draws
replayed as step uniforms, its states transferred, both stepped in lockstep (test helpers)."""

from __future__ import annotations

import functools
import operator

import jax
import jax.numpy as jnp
import minatar
import numpy as np

from jaxsim.envs.minatar import seaquest as sq
from jaxsim.envs.minatar.seaquest import Seaquest
from jaxsim.envs.minatar.space_invaders import SpaceInvaders
from jaxsim.rng import ResetDraws
from jaxsim.rollout.step import Lanes, batch_step, initial_carry

STICKY = 0.1


class Recorder:
    """Stands in for the original's `random`: draws from a seeded RandomState and logs them."""

    def __init__(self, seed):
        self.state = np.random.RandomState(seed)
        self.log = []

    def rand(self):
        value = self.state.rand()
        self.log.append(value)
        return value

    def randint(self, low, high=None):
        value = int(self.state.randint(low, high))
        self.log.append(value)
        return value


def original(game, seed, ramping=True):
    env = minatar.Environment(game, sticky_action_prob=STICKY, difficulty_ramping=ramping)
    env.random = env.env.random = Recorder(seed)
    return env


def _coin(flag):  # a uniform that makes `u < 0.5` (or `< 1/3`, `< 0.1`) come out as `flag`
    return 0.05 if flag else 0.75


def _row_uniform(row):  # the uniform that maps to randint(1, 9) == row
    return (row - 1 + 0.5) / 8


_BITS = 1 << np.arange(10)


def words(grid):
    """10 int32 row words of a [10, 10] 0/1 array."""
    return tuple((np.asarray(grid) != 0).astype(np.int32) @ _BITS)


# ---------------------------------------------------------------------------- SpaceInvaders
def si_transfer(env, orig):
    g = orig.env
    i = np.int32
    return env.state_type(
        pos=i(g.pos),
        aliens=words(g.alien_map),
        friendly_bullets=words(g.f_bullet_map),
        enemy_bullets=words(g.e_bullet_map),
        alien_dir=i(g.alien_dir),
        enemy_move_interval=i(g.enemy_move_interval),
        alien_move_timer=i(g.alien_move_timer),
        alien_shot_timer=i(g.alien_shot_timer),
        shot_timer=i(g.shot_timer),
        ramp_index=i(g.ramp_index),
        last_action=i(orig.last_action),
        time=i(0),
    )


def si_perturb(orig, rng):
    """A start the random policy would rarely reach: a thinned wave, a ramped speed."""
    g = orig.env
    if rng.random() < 0.5:
        g.alien_map = g.alien_map * (rng.random((10, 10)) < rng.choice([0.05, 0.2, 0.5]))
        if not g.alien_map.any():
            g.alien_map[0, 4] = 1
    g.enemy_move_interval = int(rng.integers(6, 13))
    g.ramp_index = int(rng.integers(0, 7))
    g.pos = int(rng.integers(0, 10))
    g.alien_move_timer = int(rng.integers(0, g.enemy_move_interval + 1))


def si_uniforms(orig, log):
    (sticky,) = log
    return (_coin(sticky < STICKY),)


# ---------------------------------------------------------------------------- Seaquest
def sq_transfer(env, orig):
    g, i, b = orig.env, np.int32, np.bool_
    k = sq.MAX_ENEMIES
    slots = {f: np.zeros(k, np.int32) for f in ("x", "y", "move_timer", "shot_timer", "order")}
    flags = {f: np.zeros(k, np.bool_) for f in ("right", "is_sub", "alive")}
    bullet = {f: np.zeros(k, np.int32) for f in ("bullet_x", "bullet_y")}
    bullet |= {f: np.zeros(k, np.bool_) for f in ("bullet_right", "bullet_alive")}
    slot = 0
    for kind in (g.e_fish, g.e_subs):
        for order, item in enumerate(kind):
            slots["x"][slot], slots["y"][slot], flags["right"][slot] = item[0], item[1], item[2]
            slots["move_timer"][slot] = item[3]
            slots["shot_timer"][slot] = item[4] if len(item) > 4 else 0
            flags["is_sub"][slot], flags["alive"][slot] = len(item) > 4, True
            slots["order"][slot] = order
            slot += 1
    # Enemy bullets go to slots no sub holds (from the last slot down): no sub can fire there.
    for n, item in enumerate(g.e_bullets):
        s = k - 1 - n
        assert not flags["is_sub"][s]
        bullet["bullet_x"][s], bullet["bullet_y"][s] = item[0], item[1]
        bullet["bullet_right"][s], bullet["bullet_alive"][s] = item[2], True
    enemies = sq.Enemies(**slots, **flags, **bullet)

    def listed(items, make, empty):
        out = [make(item) for item in items]
        assert len(out) <= 2
        return tuple(out + [empty] * (2 - len(out)))

    bullets = listed(
        g.f_bullets,
        lambda it: sq.Bullet(i(it[0]), i(it[1]), b(it[2]), b(True)),
        sq.Bullet(i(0), i(0), b(False), b(False)),
    )
    divers = listed(
        g.divers,
        lambda it: sq.Diver(i(it[0]), i(it[1]), b(it[2]), i(it[3]), b(True)),
        sq.Diver(i(0), i(0), b(False), i(0), b(False)),
    )
    return env.state_type(
        sub_x=i(g.sub_x),
        sub_y=i(g.sub_y),
        sub_right=b(g.sub_or),
        oxygen=i(g.oxygen),
        diver_count=i(g.diver_count),
        bullets=bullets,
        divers=divers,
        enemies=enemies,
        spawned=i(slot),
        e_spawn_speed=i(g.e_spawn_speed),
        e_spawn_timer=i(g.e_spawn_timer),
        d_spawn_timer=i(g.d_spawn_timer),
        move_speed=i(g.move_speed),
        shot_timer=i(g.shot_timer),
        surface=b(g.surface),
        ramp_index=i(g.ramp_index),
        last_action=i(orig.last_action),
        time=i(0),
    )


def sq_perturb(orig, rng):
    """A start deep in the game: divers aboard (six: a full surfacing), little oxygen, a ramp."""
    g = orig.env
    g.diver_count = int(rng.choice([0, 1, 5, 6, 6, -1]))
    g.oxygen = int(rng.choice([200, 60, 15, 3]))
    g.ramp_index = int(rng.integers(0, 25))
    g.e_spawn_speed = int(max(1, 20 - g.ramp_index))
    g.move_speed = int(rng.choice([2, 3, 4, 5]))
    g.e_spawn_timer = int(rng.integers(0, g.e_spawn_speed + 1))
    g.d_spawn_timer = int(rng.integers(0, 31))
    g.sub_y = int(rng.integers(0, 4))
    g.surface = g.sub_y == 0


def sq_uniforms(orig, log, spawns):
    enemy, diver = spawns
    u = [_coin(log.pop(0) < STICKY), 0.5, 0.5, 0.5, 0.5, 0.5]
    if enemy:
        u[1], u[2], u[3] = _coin(log[0] < 0.5), _coin(log[1] < 1 / 3), _row_uniform(log[2])
        log = log[3:]
    if diver:
        u[4], u[5] = _coin(log[0] < 0.5), _row_uniform(log[1])
        log = log[2:]
    assert not log
    return tuple(u)


def sq_canonical_original(orig):
    g = orig.env
    return dict(
        sub=(g.sub_x, g.sub_y, bool(g.sub_or)),
        counts=(g.oxygen, g.diver_count, g.e_spawn_speed, g.e_spawn_timer, g.d_spawn_timer),
        more=(g.move_speed, g.shot_timer, bool(g.surface), g.ramp_index),
        bullets=[(x, y, bool(r)) for x, y, r in g.f_bullets],
        divers=[tuple(int(v) for v in d) for d in g.divers],
        fish=[tuple(int(v) for v in f) for f in g.e_fish],
        subs=[tuple(int(v) for v in s) for s in g.e_subs],
        enemy_bullets=sorted((x, y, bool(r)) for x, y, r in g.e_bullets),
    )


def sq_canonical(state, i):
    s = jax.tree.map(lambda v: np.asarray(v)[i], state)
    en = s.enemies

    def kind(sub):
        idx = [k for k in np.argsort(en.order) if en.alive[k] and en.is_sub[k] == sub]
        fields = (en.x, en.y, en.right, en.move_timer) + ((en.shot_timer,) if sub else ())
        return [tuple(int(f[k]) for f in fields) for k in idx]

    return dict(
        sub=(int(s.sub_x), int(s.sub_y), bool(s.sub_right)),
        counts=tuple(
            int(v)
            for v in (s.oxygen, s.diver_count, s.e_spawn_speed, s.e_spawn_timer, s.d_spawn_timer)
        ),
        more=(int(s.move_speed), int(s.shot_timer), bool(s.surface), int(s.ramp_index)),
        bullets=[(int(b.x), int(b.y), bool(b.right)) for b in s.bullets if b.alive],
        divers=[(int(d.x), int(d.y), int(d.right), int(d.timer)) for d in s.divers if d.alive],
        fish=kind(False),
        subs=kind(True),
        enemy_bullets=sorted(
            (int(en.bullet_x[k]), int(en.bullet_y[k]), bool(en.bullet_right[k]))
            for k in range(sq.MAX_ENEMIES)
            if en.bullet_alive[k]
        ),
    )


# ---------------------------------------------------------------------------- lockstep parity
GAMES = {
    "space_invaders": (SpaceInvaders, si_transfer, si_perturb),
    "seaquest": (Seaquest, sq_transfer, sq_perturb),
}


def _draws(orig, log, spawns):
    """The step uniforms that make jaxsim draw what the original drew (`log`)."""
    return si_uniforms(orig, log) if spawns is None else sq_uniforms(orig, list(log), spawns)


def _full_state(env, orig, batch, i):
    """(the original's game state, lane i's), comparable: hidden state included."""
    if orig.env_name == "seaquest":
        return sq_canonical_original(orig), sq_canonical(batch, i)
    mine = jax.tree.map(lambda v: int(v[i]), batch).replace(time=0)
    return jax.tree.map(int, si_transfer(env, orig)), mine


def _milestones(orig, before, reward):
    """What this step reached that the parity should have covered (counted per game)."""
    g = orig.env
    seen = {"reward": reward > 0, "ramp": g.ramp_index > before["ramp"]}
    if orig.env_name == "seaquest":
        seen |= {
            "full surfacing": before["divers"] == 6 and g.diver_count == -1,
            "negative divers": g.diver_count < 0,
            "sub gone as reward came": len(g.e_subs) < before["subs"] and reward > 0,
            "enemy bullets": len(g.e_bullets) > 0,
            "four enemies": len(g.e_subs) + len(g.e_fish) >= 4,
        }
    else:
        seen |= {"wave cleared": before["aliens"] <= reward, "turn": g.alien_dir != before["dir"]}
    return seen


def _before(orig):
    g = orig.env
    if orig.env_name == "seaquest":
        return {"ramp": g.ramp_index, "divers": g.diver_count, "subs": len(g.e_subs)}
    return {"ramp": g.ramp_index, "aliens": int(g.alien_map.sum()), "dir": g.alien_dir}


# The params are arguments, not constants: a run with the ramp and one without (the env differs,
# so jit traces again) lower to the same program, which the run's compilation cache then loads.
@functools.partial(jax.jit, static_argnums=0)
def _lockstep_step(env, state, action, params, u):
    state, reward, terminal = env.dynamics(state, action, params, u)
    return state, reward, terminal, jax.vmap(env.observe, in_axes=(0, None))(state, params)


def run_lockstep(game, num_envs, steps, seed, ramping=True):
    """Steps `num_envs` originals and one batch of jaxsim states side by side under random
    actions, each original's draws replayed into `env.dynamics` as step uniforms.

    Episodes start from the original's state, transferred (half of them perturbed first into
    states deep in the game: ramped, thinned waves, divers aboard), and 1% of steps transfer a
    running game's state again. Returns (mismatched steps per check, first mismatch, steps,
    episodes, milestone counts).
    """
    cls, transfer, perturb = GAMES[game]
    env = cls(difficulty_ramping=ramping)
    params = env.default_params
    rng = np.random.default_rng(seed)
    origs = [original(game, seed * 1000 + i, ramping) for i in range(num_envs)]

    def start(orig):
        orig.reset()
        if rng.random() < 0.5:
            perturb(orig, rng)
        return transfer(env, orig)

    def to_numpy(tree):
        return jax.tree.map(np.array, tree)

    batch = to_numpy(jax.tree.map(lambda *xs: np.stack(xs), *[start(o) for o in origs]))

    bad = dict(obs=0, reward=0, terminal=0, state=0)
    first, seen, episodes = {}, {}, 0
    for _ in range(steps):
        actions = rng.integers(0, 6, num_envs)
        draws, rewards, terminals, observations = [], [], [], []
        for orig, action in zip(origs, actions, strict=True):
            orig.random.log.clear()
            g = orig.env
            spawns = (g.e_spawn_timer == 0, g.d_spawn_timer == 0) if game == "seaquest" else None
            before = _before(orig)
            reward, terminal = orig.act(int(action))
            for name, hit in _milestones(orig, before, reward).items():
                seen[name] = seen.get(name, 0) + bool(hit)
            draws.append(_draws(orig, orig.random.log, spawns))
            rewards.append(reward)
            terminals.append(terminal)
            observations.append(orig.state())
        u = tuple(np.asarray(c, np.float32) for c in zip(*draws, strict=True))
        batch, reward, terminal, obs = to_numpy(
            _lockstep_step(env, batch, jnp.asarray(actions, jnp.int32), params, u)
        )
        for i, orig in enumerate(origs):
            checks = dict(
                obs=obs[i].dtype == observations[i].dtype == np.bool_
                and np.array_equal(obs[i], observations[i]),
                reward=reward[i] == np.float32(rewards[i]),
                terminal=terminal[i] == terminals[i],
                state=operator.eq(*_full_state(env, orig, batch, i)),
            )
            for name, ok in checks.items():
                if not ok:
                    bad[name] += 1
                    first.setdefault(name, (i, _full_state(env, orig, batch, i)))
            if terminals[i] or rng.random() < 0.01:  # a new episode, or a transfer mid-episode
                episodes += bool(terminals[i])
                fresh = start(orig) if terminals[i] else transfer(env, orig)
                for leaf, value in zip(jax.tree.leaves(batch), jax.tree.leaves(fresh), strict=True):
                    leaf[i] = value
    return bad, first, steps * num_envs, episodes, seen


# ---------------------------------------------------------------------------- random policy
def original_episodes(game, episodes, seed):
    """(returns, lengths) of the original under uniformly random actions."""
    rng = np.random.default_rng(seed)
    orig = minatar.Environment(game, sticky_action_prob=STICKY, difficulty_ramping=True)
    orig.seed(seed)
    returns, lengths = [], []
    for _ in range(episodes):
        orig.reset()
        total, n, terminal = 0.0, 0, False
        while not terminal:
            reward, terminal = orig.act(int(rng.integers(6)))
            total, n = total + reward, n + 1
        returns.append(total)
        lengths.append(n)
    return np.asarray(returns), np.asarray(lengths)


def jaxsim_episode_stats(env, num_envs, steps, seed):
    """Episode statistics of jaxsim's own transition path (counter-based resets, sticky and
    spawn draws, same-step auto-reset) under uniformly random actions. The observation is left
    out: it does not change the episodes, and skipping it keeps the compile short."""
    params = env.default_params
    lanes = Lanes(vmapped=True)
    axes = env.params_axes(params, num_envs)

    @jax.jit
    def run(key):
        draws = ResetDraws.for_rollout(env, key, num_envs)
        carry = initial_carry(env, lanes, params, axes, draws, with_sums=True, with_checks=False)

        def body(carry, t):
            action = jax.random.randint(jax.random.fold_in(key, t), (num_envs,), 0, 6)
            counter = (t + 1).astype(jnp.uint32)
            carry, _ = batch_step(env, lanes, carry, action, params, axes, counter, draws)
            return carry, None

        carry, _ = jax.lax.scan(body, carry, jnp.arange(steps, dtype=jnp.int32))
        return carry.sums.stats()

    return run(jax.random.key(seed))
