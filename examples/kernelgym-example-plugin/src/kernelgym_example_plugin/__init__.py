"""An example kernelgym env plugin: GoRight-v0, a slippery one-dimensional corridor."""
