"""gymnax's MinAtar ports timed on JAX's cpu backend, for benchmarks/bench_minatar.py.

Run by the python of a throwaway venv that holds ``jax[cpu]`` and ``gymnax`` (never a
kernelgym dependency; see benchmarks/README.md). It serves JSON lines: each request on stdin,
``{"game": "Breakout", "num_envs": 4096, "seconds": 1.0}``, is answered by one line on
stdout, ``{"game": ..., "num_envs": ..., "rate": env-steps/s, "scan_steps": T}``. The first
request for a (game, N) compiles and warms that cell up (``"seconds": 0`` does only that and
answers ``"compile_s"``), so bench_minatar.py keeps this one process alive and interleaves
its cells with kernelgym's and the original's. The first line it writes names the versions.

The timed form is the fastest documented way to run gymnax, the PureJaxRL one: ``jax.jit``
of a ``jax.lax.scan`` over T steps of ``jax.vmap(env.step)``, the random actions drawn inside
the scan and gymnax's own auto-reset in ``env.step``. The whole rollout is one XLA program, so
Python and dispatch costs are paid once per T steps, not per step. The observation stays in
the scan's carry, so XLA cannot drop its computation (kernelgym writes it every step, and a
learner reads it). Compile and warm-up are excluded; the clock stops after
``block_until_ready``. T shrinks as N grows (one call stays well under a second) and is the
same for every game.

    python bench_minatar_gymnax.py                       # serve requests from stdin
    python bench_minatar_gymnax.py Breakout 4096 1.0     # one cell, one line
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import gymnax
import jax
import jax.numpy as jnp

GAMES = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")


def scan_steps(num_envs: int) -> int:
    """Steps per jitted call: 1,024 for small N, down to 2 at N = 65,536 (2**17 env-steps a call)."""
    return max(2, min(1024, 2**17 // num_envs))


class Cell:
    """One game at one N: its jitted rollout and the carry it advances."""

    def __init__(self, game: str, num_envs: int, steps: int):
        if game not in GAMES:
            raise ValueError(f"game: expected one of {GAMES}, got {game!r}")
        if num_envs < 1:
            raise ValueError(f"num_envs: expected >= 1, got {num_envs}")
        env, params = gymnax.make(f"{game}-MinAtar")
        num_actions = env.action_space(params).n
        step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

        def body(carry: tuple, _: None) -> tuple[tuple, None]:
            key, state, _obs, reward_sum = carry
            key, key_action, key_step = jax.random.split(key, 3)
            actions = jax.random.randint(key_action, (num_envs,), 0, num_actions)
            # gymnax >= 1.0 returns (obs, state, reward, terminated, truncated, info), older
            # releases (obs, state, reward, done, info): the first three agree
            out = step(jax.random.split(key_step, num_envs), state, actions, params)
            return (key, out[1], out[0], reward_sum + out[2]), None

        self.rollout: Callable[[tuple], tuple] = jax.jit(lambda carry: jax.lax.scan(body, carry, None, length=steps)[0])
        key, key_reset = jax.random.split(jax.random.PRNGKey(0))
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key_reset, num_envs), params)
        self.carry = (key, state, obs, jnp.zeros(num_envs, jnp.float32))
        self.steps = steps
        self.num_envs = num_envs

    def advance(self) -> None:
        self.carry = jax.block_until_ready(self.rollout(self.carry))

    def rate(self, seconds: float) -> float:
        """Env-steps/s over whole calls, until at least ``seconds`` have passed."""
        calls, start = 0, time.perf_counter()
        while calls == 0 or time.perf_counter() - start < seconds:
            self.advance()
            calls += 1
        return calls * self.steps * self.num_envs / (time.perf_counter() - start)


def answer(cells: dict[tuple[str, int], Cell], request: dict[str, Any]) -> dict[str, Any]:
    """Time (or with ``seconds`` 0 only compile and warm up) the requested cell."""
    game, num_envs, seconds = request["game"], int(request["num_envs"]), float(request["seconds"])
    reply: dict[str, Any] = {"game": game, "num_envs": num_envs}
    if (game, num_envs) not in cells:
        start = time.perf_counter()
        cell = Cell(game, num_envs, int(request.get("scan_steps") or scan_steps(num_envs)))
        cell.advance()  # compile
        cell.advance()  # warm: every buffer touched
        cells[(game, num_envs)] = cell
        reply["compile_s"] = time.perf_counter() - start
    cell = cells[(game, num_envs)]
    reply["scan_steps"] = cell.steps
    if seconds > 0:
        reply["rate"] = cell.rate(seconds)
    return reply


def main(argv: list[str]) -> None:
    cells: dict[tuple[str, int], Cell] = {}
    if argv:
        game, num_envs, seconds = argv
        answer(cells, {"game": game, "num_envs": num_envs, "seconds": 0})
        print(json.dumps(answer(cells, {"game": game, "num_envs": num_envs, "seconds": seconds})))
        return
    hello = {"jax": version("jax"), "jaxlib": version("jaxlib"), "gymnax": version("gymnax")}
    print(json.dumps({**hello, "devices": [str(device) for device in jax.devices()]}), flush=True)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(answer(cells, json.loads(line))), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
