"""Classic-control envs (gymnasium dynamics): CartPole, Pendulum, MountainCar, Acrobot."""
