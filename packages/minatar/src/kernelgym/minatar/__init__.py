"""kernelgym-minatar: the five MinAtar games (Young & Tian, 2019) as kernelgym env kernels.

Each game module (`breakout`, ...) is a kernelgym env plugin registered through the
``kernelgym.envs`` entry-point group; `kernelgym.envs.make("MinAtar-Breakout-v1", n)`
loads it. Importing this package imports no game and compiles nothing.
"""
