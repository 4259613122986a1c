"""The ``kernelgym`` command: ``list``, ``bench``, ``check``, ``demo``, ``compile`` and ``gpu-compile``.

Every subcommand has ``--help``. A bad argument exits with code 2 and a message that
names the argument, what was expected and what was received (argparse's convention),
before anything is compiled or run; output files are checked then too (``.png``, and
opened for writing: see `kernelgym.cli.outputs`). A result is printed before its file is
written; a file that cannot be written at the end is a one-line error (exit code 1). Ctrl-C
prints one line and exits with code 130; running out of memory, one line and exit code 1.
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["main", "console", "build_parser"]

BACKENDS = ("auto", "cuda", "cpu", "sim")
PRECISIONS = ("float64", "float32")
AUTORESET_MODES = ("next_step", "same_step")
DEFAULT_BENCH_NUM_ENVS = (1024, 16384, 65536)
DEFAULT_COMPILE_NUM_ENVS = 1024  # enough for the thread team on cpu (binding.PARALLEL_FROM is 128)
DEFAULT_DEMO_PLOT = "kernelgym-demo-learning-curve.png"
# Seeds reach torch.manual_seed and numpy, which take up to 64 bits
MAX_SEED = 2**64 - 1
# More envs than any one machine steps usefully; beyond, allocations fail deep in the run
MAX_NUM_ENVS = 2**26
MAX_BENCH_STEPS = 10**7  # steps per bench repeat
MAX_REPEATS = 10**4
MAX_EXAMPLES = 10**6  # hypothesis examples per kit check
MAX_ENV_STEPS = 2**53  # a demo's env-step budget: every count a float64 holds exactly


# ------------------------------------------------------------------- argument types
def int_at_least(minimum: int, maximum: int | None = None):
    """argparse type: an int >= ``minimum`` (and <= ``maximum`` if given); argparse
    prefixes the argument's name."""
    expected = f"an integer >= {minimum}" + ("" if maximum is None else f" and <= {maximum}")

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"expected {expected}, received {text!r}")
        return value

    return parse


class StoreGiven(argparse.Action):
    """Store the value and record that the command line gave it (``<dest>_given``), so that a
    default the user did not ask for can be replaced by a better one for the machine."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        setattr(namespace, f"{self.dest}_given", True)


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)
seed_int = int_at_least(0, MAX_SEED)
num_envs_int = int_at_least(1, MAX_NUM_ENVS)
# Counts of work are bounded too: a mistyped 40-digit count would run for ever, not fail
bench_steps_int = int_at_least(1, MAX_BENCH_STEPS)
repeats_int = int_at_least(1, MAX_REPEATS)
max_examples_int = int_at_least(1, MAX_EXAMPLES)
env_steps_int = int_at_least(1, MAX_ENV_STEPS)


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, received {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number > 0, received {text!r}")
    return value


def tensorboard_dir(text: str) -> str:
    """argparse type: a folder for TensorBoard event files; needs the tensorboard package."""
    try:
        import tensorboard  # noqa: F401  (torch.utils.tensorboard writes through it)
    except ImportError:
        raise argparse.ArgumentTypeError(
            'needs the tensorboard package: pip install "kernelgym[tensorboard]"'
        ) from None
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"expected a folder, received {text!r} (a file)")
    return text


def comma_separated(text: str) -> list[str]:
    """argparse type: a non-empty comma-separated list of names."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated names, received {text!r}")
    return names


def png_path(text: str) -> str:
    """argparse type: a PNG to write: ending in .png (matplotlib picks the format from it),
    in an existing folder, not a folder itself, and opened for writing (an existing file is
    left unchanged, a new one removed again); checked before any work."""
    from kernelgym.cli.outputs import write_problem

    if not text.lower().endswith(".png"):
        raise argparse.ArgumentTypeError(f"expected a file name ending in .png, received {text!r}")
    folder = os.path.dirname(os.path.abspath(text))
    problem = (
        f"folder {folder!r} does not exist"
        if not os.path.isdir(folder)
        else "it is a folder"
        if os.path.isdir(text)
        else write_problem(text)
    )
    if problem:
        raise argparse.ArgumentTypeError(f"expected a writable .png file path ({problem}), received {text!r}")
    return text


# --------------------------------------------------------------------------- parser
# what `kernelgym --version` reports besides kernelgym itself, where installed
VERSION_DISTRIBUTIONS = (
    "kernelgym-core",
    "kernelgym-envs",
    "kernelgym-collectors",
    "kernelgym-memory",
    "kernelgym-minatar",
    "numba",
    "numba-cuda",
    "torch",
)


def version_text() -> str:
    """kernelgym's version, then each installed distribution of `VERSION_DISTRIBUTIONS`, a line each."""
    from importlib import metadata

    lines = [f"kernelgym {metadata.version('kernelgym')}"]
    for name in VERSION_DISTRIBUTIONS:
        try:
            lines.append(f"  {name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return "\n".join(lines)


class _VersionAction(argparse.Action):
    """``--version``: `version_text`, read only when asked (no import of numba or torch)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``kernelgym`` command and its subcommands."""
    from kernelgym.envs.testing.cli import PARAM_HELP, max_examples_help

    parser = argparse.ArgumentParser(
        prog="kernelgym",
        description="Reinforcement-learning environments as Numba kernels (GPU or CPU).",
    )
    parser.add_argument(
        "--version", action=_VersionAction, help="print the versions of kernelgym's installed distributions and exit"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    listing = commands.add_parser(
        "list",
        help="list the registered envs",
        description="List the registered envs: the plugin and distribution providing each, "
        "their spaces and agent counts.",
    )

    bench = commands.add_parser(
        "bench",
        help="measure env-steps/s against gymnasium",
        description="Measure an env's env-steps/s at several num_envs, side by side with "
        "gymnasium's vector env at the same num_envs where gymnasium has the env "
        "(min, median and max over repeats, and the machine's load; random actions).",
    )
    bench.add_argument("env", metavar="ENV", help="a registered env id (see `kernelgym list`)")
    bench.add_argument(
        "--num-envs",
        type=num_envs_int,
        nargs="+",
        default=list(DEFAULT_BENCH_NUM_ENVS),
        metavar="N",
        help="numbers of envs to measure (default: %(default)s)",
    )
    bench.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="kernelgym backend (default: %(default)s: cuda when a GPU is usable, else cpu)",
    )
    bench.add_argument("--steps", type=bench_steps_int, default=200, help="steps per repeat (default: %(default)s)")
    bench.add_argument(
        "--repeats",
        type=repeats_int,
        default=3,
        help="timed repeats; min, median and max are reported (default: %(default)s)",
    )
    bench.add_argument("--no-gymnasium", action="store_true", help="measure kernelgym only")
    bench.add_argument("--plot", type=png_path, metavar="FILE.png", help="write a PNG of env-steps/s against num_envs")

    check = commands.add_parser(
        "check",
        help="run the property-test kit on envs",
        description="Property-test envs with kernelgym.envs.testing (hypothesis checks of the "
        "kernels against the env's CPU reference: parity, determinism, batch "
        "invariance, autoreset, bounds, invariants, ...) and print each report. "
        "Exit code 0 when every check passed, 1 otherwise.",
    )
    check.add_argument("envs", nargs="+", metavar="ENV", help="registered env ids (see `kernelgym list`)")
    check.add_argument(
        "--backend",
        choices=BACKENDS,
        default="cpu",
        help="where the kernels run (default: %(default)s; sim re-runs under the simulator)",
    )
    check.add_argument("--max-examples", type=max_examples_int, help=max_examples_help())
    check.add_argument(
        "--checks",
        type=comma_separated,
        metavar="NAME,NAME",
        help="only these checks (default: all; names in the report)",
    )
    check.add_argument("--seed", type=seed_int, help="reproduce a run (each report prints its seed)")
    check.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="check the kernels compiled for this precision, for envs that declare the choice "
        "(default: the env's own; see `kernelgym list`)",
    )
    check.add_argument(
        "--fast-math",
        action="store_true",
        help="also check the fast-math build (FMA contraction on) within its stated tolerance",
    )
    check.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help=PARAM_HELP)

    demo = commands.add_parser(
        "demo",
        help="train PPO on CartPole-v1 and plot the learning curve",
        description="Train a PPO agent on the built-in CartPole-v1 with the DeviceCollector and a "
        "kernelgym memory, on the best backend present, until the mean return of the "
        "last 100 episodes reaches the target; then write a learning-curve PNG. "
        "Needs no argument.",
    )
    demo.add_argument("--seed", type=seed_int, default=1, help="random seed (default: %(default)s)")
    demo.add_argument("--backend", choices=BACKENDS, default="auto", help="backend (default: %(default)s)")
    demo.add_argument(
        "--num-envs",
        type=num_envs_int,
        default=64,
        action=StoreGiven,
        help="parallel envs (default: %(default)s; on cuda, a count chosen from the GPU's SM count)",
    )
    demo.set_defaults(num_envs_given=False)
    demo.add_argument(
        "--target-return",
        type=positive_float,
        default=475.0,
        help="stop at this mean episode return (default: %(default)s)",
    )
    demo.add_argument(
        "--max-env-steps",
        type=env_steps_int,
        default=3_000_000,
        help="stop after this many env steps (default: %(default)s)",
    )
    demo.add_argument(
        "--time-limit",
        type=positive_float,
        default=300.0,
        metavar="SECONDS",
        help="stop after this many seconds (default: %(default)s)",
    )
    demo.add_argument(
        "--out",
        type=png_path,
        default=DEFAULT_DEMO_PLOT,
        metavar="FILE.png",
        help="learning-curve PNG (default: %(default)s)",
    )
    demo.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    demo.add_argument(
        "--tensorboard",
        type=tensorboard_dir,
        metavar="DIR",
        help="also write TensorBoard scalars (return, env-steps/s, losses) to DIR "
        '(pip install "kernelgym[tensorboard]")',
    )

    warm = commands.add_parser(
        "compile",
        help="compile envs' kernels ahead of time (fill the disk cache)",
        description="Make each env and run a reset and a step, so that its kernels are compiled "
        "and written to the disk cache (KERNELGYM_CACHE_DIR, NUMBA_CACHE_DIR) before the first "
        "real run, e.g. when building a CI image or on a cluster's login node. Prints per env "
        "whether it compiled or was already cached, and how long it took.",
    )
    warm.add_argument("envs", nargs="+", metavar="ENV", help="registered env ids (see `kernelgym list`)")
    warm.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="the backend to compile for (default: %(default)s: cuda when a GPU is usable, else cpu)",
    )
    warm.add_argument(
        "--num-envs",
        type=num_envs_int,
        metavar="N",
        help=f"envs to make (default: {DEFAULT_COMPILE_NUM_ENVS}, on sim 1: the simulator runs each "
        "thread in Python); on cpu, from 128 envs one env is made too, so that both the thread "
        "team's build and its serial twin are compiled",
    )
    warm.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="compile for this precision, for envs that declare the choice (default: the env's own)",
    )
    warm.add_argument(
        "--autoreset-mode",
        choices=(*AUTORESET_MODES, "both"),
        default="both",
        help="compile the step for this autoreset mode (default: %(default)s; `kernelgym demo` and "
        "the collectors use same_step, make() next_step)",
    )

    gpu_compile = commands.add_parser(
        "gpu-compile",
        help="compile every kernel for sm_90a and sm_80 (no GPU needed)",
        description="Run core's kernels, every registered env (both autoreset modes), memory "
        "kernels and the DeviceCollector on the cpu backend, then compile each kernel "
        "with the argument types those launches passed, with NVIDIA's NVVM and ptxas "
        '(pip install "kernelgym-core[gpu-compile]"). Audits each build\'s PTX (no contracted '
        "fma, no unrounded or approximate float instruction outside libdevice) and checks "
        "its configured launch against sm_80 and sm_90. Prints registers, stack, spills, "
        "float64 share, the audit, libdevice calls and occupancy; exit code 1 on any compile "
        "error, audit finding or launch that does not fit, 2 without the compilers.",
    )
    gpu_compile.add_argument(
        "envs", nargs="*", metavar="ENV", help="only these env ids (default: every registered env)"
    )
    gpu_compile.add_argument("--verbose", action="store_true", help="print each kernel as it compiles")

    # each subcommand carries its handler and its own parser (for its error messages)
    for subparser, handler in (
        (listing, run_list),
        (bench, run_bench),
        (check, run_check),
        (demo, run_demo),
        (warm, run_compile),
        (gpu_compile, run_gpu_compile),
    ):
        subparser.set_defaults(handler=handler, subparser=subparser)
    return parser


# ------------------------------------------------------------------------- commands
def check_declared_env_ids(parser: argparse.ArgumentParser, env_ids: list[str]) -> None:
    """Exit with code 2 for an id no installed plugin declares, before any plugin is imported.

    Plugins declare their ids in metadata (the ``kernelgym.envs.ids`` entry points), so a
    mistyped id is refused in well under a second instead of after every plugin loaded.
    When a plugin declares none, its ids are known only once it is loaded, and
    `check_env_id` decides.
    """
    from kernelgym.envs.registry import declared_env_ids, undeclaring_plugins

    declared = declared_env_ids()
    unknown = [env_id for env_id in env_ids if env_id not in declared]
    if unknown and not undeclaring_plugins():
        parser.error(unknown_env_message(unknown[0], declared))


def check_env_id(parser: argparse.ArgumentParser, env_id: str) -> None:
    """Exit with code 2 unless ``env_id`` is registered (this loads the plugins)."""
    import kernelgym.envs as kge

    known = kge.list_envs()
    if env_id not in known:
        parser.error(unknown_env_message(env_id, known))


def unknown_env_message(env_id: str, known: list[str]) -> str:
    """argparse's error text for an unknown ``env_id``, naming an id that differs only in case."""
    same_but_case = [name for name in known if name.lower() == env_id.lower()]
    hint = f" (ids are case-sensitive: did you mean {same_but_case[0]!r}?)" if same_but_case else ""
    return f"argument ENV: expected one of the registered envs {known}, received {env_id!r}{hint}"


def check_backend_name(parser: argparse.ArgumentParser, name: str) -> None:
    """Exit with code 2 when ``--backend sim`` cannot run, before numba or a plugin is imported.

    The simulator replaces ``numba.cuda`` only when ``NUMBA_ENABLE_CUDASIM=1`` is set before
    numba is imported; the command imports numba later, so the variable decides here.
    """
    if name == "sim" and "numba" not in sys.modules and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        parser.error(
            "argument --backend: expected a backend available here, received 'sim': it needs "
            "NUMBA_ENABLE_CUDASIM=1 in the environment (e.g. `NUMBA_ENABLE_CUDASIM=1 kernelgym ...`)"
        )


def resolve_backend_or_exit(parser: argparse.ArgumentParser, name: str) -> str:
    """The concrete backend for ``--backend``, or exit 2 saying why it is unavailable."""
    from kernelgym.core import BackendUnavailableError, resolve_backend

    try:
        return resolve_backend(name)
    except BackendUnavailableError as error:
        parser.error(f"argument --backend: {name!r} is not available here: {error}")


def run_list(args, parser) -> int:
    from kernelgym.cli.env_table import print_env_table

    print_env_table()
    return 0


def run_bench(args, parser) -> int:
    check_declared_env_ids(parser, [args.env])
    check_backend_name(parser, args.backend)
    check_env_id(parser, args.env)
    backend = resolve_backend_or_exit(parser, args.backend)
    # after the arguments are checked: matplotlib and the runtime take seconds to import
    from kernelgym.cli.outputs import save_output
    from kernelgym.cli.plots import plot_throughput
    from kernelgym.cli.throughput import bench_env, print_throughput_table

    bench = bench_env(
        args.env,
        sorted(set(args.num_envs)),
        backend=backend,
        steps=args.steps,
        repeats=args.repeats,
        with_gymnasium=not args.no_gymnasium,
    )
    print_throughput_table(args.env, backend, bench)
    if args.plot:
        if not save_output(
            lambda path: plot_throughput(args.env, backend, bench.rows, path), args.plot, "--plot", "bench", "plot"
        ):
            return 1
        print(f"plot written to {args.plot}")
    return 0


def run_check(args, parser) -> int:
    from kernelgym.envs import get_spec
    from kernelgym.envs.testing.cli import precision_problem
    from kernelgym.envs.testing.known_checks import CHECK_NAMES, OPT_IN_CHECKS

    # what metadata and the kit's names can refuse first: loading the plugins takes seconds
    check_declared_env_ids(parser, args.envs)
    known = [*CHECK_NAMES, *OPT_IN_CHECKS]
    unknown = [name for name in args.checks or () if name not in known]
    if unknown:
        parser.error(f"argument --checks: expected names among {known}, received {unknown}")
    from kernelgym.envs.testing import main_check

    for env_id in args.envs:
        check_env_id(parser, env_id)
        problem = precision_problem(get_spec(env_id), args.precision)
        if problem:
            parser.error(problem)
    # the kit's own command runs the checks, prints the reports and re-runs sim in a child
    forwarded = [*args.envs, "--backend", args.backend]
    if args.max_examples is not None:
        forwarded += ["--max-examples", str(args.max_examples)]
    if args.checks:
        forwarded += ["--checks", ",".join(args.checks)]
    if args.seed is not None:
        forwarded += ["--seed", str(args.seed)]
    if args.precision is not None:
        forwarded += ["--precision", args.precision]
    if args.fast_math:
        forwarded.append("--fast-math")
    for text in args.param:
        forwarded += ["--param", text]
    return main_check(forwarded)


def run_compile(args, parser) -> int:
    check_declared_env_ids(parser, args.envs)
    check_backend_name(parser, args.backend)
    from kernelgym.envs import get_spec
    from kernelgym.envs.testing.cli import precision_problem

    for env_id in args.envs:
        check_env_id(parser, env_id)
        problem = precision_problem(get_spec(env_id), args.precision)
        if problem:
            parser.error(problem)
    backend = resolve_backend_or_exit(parser, args.backend)
    from kernelgym.cli.warm_up import describe, warm_up

    num_envs = args.num_envs or (1 if backend == "sim" else DEFAULT_COMPILE_NUM_ENVS)
    modes = AUTORESET_MODES if args.autoreset_mode == "both" else (args.autoreset_mode,)
    for env_id in dict.fromkeys(args.envs):  # each once, in the order given
        for mode in modes:
            print(describe(warm_up(env_id, backend, num_envs, mode, args.precision)), flush=True)
    return 0


def run_gpu_compile(args, parser) -> int:
    check_declared_env_ids(parser, args.envs)
    for env_id in args.envs:
        check_env_id(parser, env_id)
    from kernelgym.cli.gpu_compile_table import run_gpu_compile as compile_everything

    return compile_everything(args.envs or None, verbose=args.verbose)


def run_demo(args, parser) -> int:
    # Idle OpenMP threads (torch's and Numba's) sleep instead of spinning, so that the
    # env's threads and torch's do not steal each other's cores between the many short
    # steps of a small training run (10x faster on a busy 2-core machine). OpenMP reads
    # this when it loads, so it applies only if torch was not imported yet.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    check_backend_name(parser, args.backend)
    backend = resolve_backend_or_exit(parser, args.backend)
    # after the backend is checked: torch and matplotlib take seconds to import
    from kernelgym.cli.outputs import save_output
    from kernelgym.cli.plots import plot_learning_curve
    from kernelgym.cli.ppo import PPOConfig, train

    num_envs = args.num_envs
    if args.num_envs_given:
        reason = "--num-envs"
    elif backend == "cuda":
        import torch

        from kernelgym.cli.ppo import choose_num_envs

        num_envs, reason = choose_num_envs(torch.device("cuda"))
    else:
        reason = f"the default on {backend}"
    print(f"kernelgym demo: {num_envs:,} envs on {backend} ({reason})", flush=True)
    config = PPOConfig(
        seed=args.seed,
        backend=backend,
        num_envs=num_envs,
        target_return=args.target_return,
        max_env_steps=args.max_env_steps,
        time_limit_s=args.time_limit,
    )
    result = train(config, progress=not args.no_progress, tensorboard_dir=args.tensorboard)
    outcome = "reached" if result.reached_target else "did NOT reach"
    # the result first: a file that cannot be written must not lose it
    print(
        f"{outcome} the target mean return {config.target_return:g}: final mean return "
        f"{result.final_return:.1f} after {result.total_env_steps:,} env steps in "
        f"{result.wall_time_s:.1f} s ({result.steps_per_s:,.0f} env-steps/s, backend {result.backend}, "
        f"seed {config.seed})",
        flush=True,
    )
    # first-call costs apart, so that the training time compares across backends and runs
    graph = ", a captured CUDA graph per fragment" if result.captured else ""
    print(
        f"time: compile {result.compile_s:.1f} s (make the env: compile or load its kernels), "
        f"warm-up {result.warmup_s:.1f} s (the first iteration: first launches{graph}), "
        f"training {result.training_s:.1f} s",
        flush=True,
    )
    if not save_output(lambda path: plot_learning_curve(result, path), args.out, "--out", "demo", "learning curve"):
        return 1
    print(f"learning curve written to {args.out}")
    if args.tensorboard:
        print(f"TensorBoard scalars written to {args.tensorboard} (tensorboard --logdir {args.tensorboard})")
    return 0 if result.reached_target else 1


def memory_errors() -> tuple:
    """The exceptions of a failed allocation: numpy's MemoryError, and torch's own (a
    RuntimeError) when torch is loaded."""
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "OutOfMemoryError"):
        return (MemoryError, torch.OutOfMemoryError)
    return (MemoryError,)


def main(argv: list[str] | None = None) -> int:
    """Run the ``kernelgym`` command with ``argv`` (default: ``sys.argv[1:]``); return its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args, args.subparser)
    except KeyboardInterrupt:
        # the user's own Ctrl-C: one line, the shell's exit code for SIGINT, no traceback
        print(f"kernelgym {args.command}: interrupted", file=sys.stderr)
        return 130
    except memory_errors() as error:
        print(
            f"kernelgym {args.command}: error: out of memory ({error}); fewer envs (--num-envs) need less",
            file=sys.stderr,
        )
        return 1


def console() -> None:
    """The ``kernelgym`` console script: `main` on ``sys.argv[1:]``, then exit with its code
    (`kernelgym.core.process_exit.exit_process`: without the seconds of freeing what it compiled)."""
    from kernelgym.core.process_exit import exit_process

    exit_process(main())


if __name__ == "__main__":
    console()
