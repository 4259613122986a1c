"""Entry point of the `kernelgym` command (subcommands are added by issue #7)."""

import argparse


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="kernelgym")
    parser.parse_args(argv)
    return 0
