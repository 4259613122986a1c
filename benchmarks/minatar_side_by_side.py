"""The long side-by-side run: every MinAtar game against the original, >= 10,000 transitions each.

Needs the original (``pip install --no-deps minatar==1.0.15``) and kernelgym-minatar.
For each game, several seeds and option sets (sticky actions 0.1 and 0.5, ramping on
and off, minimal and full action sets), two random policies: uniform over the action
set, and one that never picks "up" (longer Seaquest/Asterix episodes, deeper into the
difficulty ramp). Prints one line per game and exits 1 on the first mismatch.

    python benchmarks/minatar_side_by_side.py [--transitions 10000] [--envs 8]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from kernelgym.minatar.side_by_side import GAMES, compare

UP = 2
OPTIONS = (  # sticky_action_prob, difficulty_ramping, minimal_action_set
    (0.1, True, True),
    (0.1, True, False),
    (0.5, False, True),
    (0.0, True, False),
)


def _actions(rng, steps, num_envs, minimal, minimal_set, avoid_up):
    actions_set = list(minimal_set) if minimal else list(range(6))
    allowed = [index for index, action in enumerate(actions_set) if not (avoid_up and action == UP)]
    return rng.choice(allowed, size=(steps, num_envs))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transitions", type=int, default=10_000, help="at least this many per game")
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=700, help="steps per run (Freeway: 3,000, past its time limit)")
    args = parser.parse_args(argv)
    from minatar import Environment

    for game, module in GAMES.items():
        minimal_set = Environment(module).minimal_action_set()
        steps = 3000 if game == "Freeway" else args.steps
        totals = {"transitions": 0, "episodes": 0, "draws": 0}
        runs, seed, started = 0, 0, time.perf_counter()
        while totals["transitions"] < args.transitions or runs < len(OPTIONS):
            sticky, ramping, minimal = OPTIONS[runs % len(OPTIONS)]
            rng = np.random.default_rng(seed)
            actions = _actions(rng, steps, args.envs, minimal, minimal_set, avoid_up=runs % 2 == 1)
            mismatch, counts = compare(
                game, actions, seed, sticky_action_prob=sticky, difficulty_ramping=ramping, minimal_action_set=minimal
            )
            if mismatch is not None:
                print(
                    f"{game}: MISMATCH (seed {seed}, sticky {sticky}, ramping {ramping}, minimal {minimal}): {mismatch}"
                )
                return 1
            for key in totals:
                totals[key] += counts[key]
            runs += 1
            seed += 1
        print(
            f"{game}: identical over {totals['transitions']:,} transitions, {totals['episodes']:,} resets, "
            f"{totals['draws']:,} random draws ({runs} runs of {args.envs} envs x {steps} steps, seeds 0-{seed - 1}; "
            f"{time.perf_counter() - started:.0f} s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
