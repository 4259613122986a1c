"""The local example: ``python -m kernelgym.collectors.ray [--address auto] [--num-gpus 1]``.

Collects CartPole-v1 fragments with a ``RayCollector`` (joining the running Ray cluster,
or starting a local one), updates the policy's weights between fragments and prints what
arrived, then closes every actor.
"""

from __future__ import annotations

import argparse
import time

import torch

from kernelgym.collectors.ray import RayCollector
from kernelgym.collectors.rollout import Actor


class LinearActor(Actor):
    """Pushes the cart right when ``obs @ weight > 0``."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor([0.0, 0.0, 1.0, 1.0]), requires_grad=False)

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        return (obs @ self.weight > 0).long(), (), {}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Collect CartPole-v1 fragments on Ray.")
    parser.add_argument("--address", default=None, help='a running cluster ("auto", "host:6379"); default: local')
    parser.add_argument("--collectors", type=int, default=2)
    parser.add_argument("--num-envs", type=int, default=256, help="envs per collector")
    parser.add_argument("--n-steps", type=int, default=64)
    parser.add_argument("--fragments", type=int, default=5)
    parser.add_argument("--num-gpus", type=float, default=0, help="GPUs per collector (then the cuda backend)")
    options = parser.parse_args(argv)

    policy = LinearActor()
    with RayCollector(
        "CartPole-v1",
        policy,
        options.n_steps,
        num_envs=options.num_envs,
        num_collectors=options.collectors,
        backend="cuda" if options.num_gpus else "cpu",
        num_gpus=options.num_gpus,
        seed=0,
        address=options.address,
    ) as collector:
        print("collectors:", *collector.placements, sep="\n  ")
        started = time.perf_counter()
        for number in range(options.fragments):
            fragment = collector.collect()
            episodes = int(fragment.state.fin[1:].sum())
            print(f"fragment {number}: obs {tuple(fragment.state.obs.shape)}, {episodes} episodes ended")
            policy.weight.mul_(0.9)  # "training": the next fragment is collected with these weights
            collector.update_policy_weights_()
        steps = options.fragments * options.n_steps * options.num_envs * options.collectors
        print(f"{steps / (time.perf_counter() - started):,.0f} env-steps/s")


if __name__ == "__main__":
    main()
