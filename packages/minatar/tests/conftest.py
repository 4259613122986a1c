"""Tests of kernelgym-minatar: the property kit per game, and the side-by-side test against the original."""
