"""The `kernelgym` command (`kernelgym.cli.main`) and the PPO demo it runs (`kernelgym.cli.ppo`)."""
