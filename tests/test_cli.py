"""The `kernelgym` command: every subcommand's happy path, --help, and bad arguments.

Bad arguments must exit with code 2 and a message naming the argument, the expected
and the received value, before any kernel is compiled.
"""

import importlib.metadata
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st
from matplotlib.image import imread

from kernelgym.cli import main as cli
from kernelgym.cli.main import console, main

SUBCOMMANDS = ("list", "bench", "check", "demo", "compile")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(capsys, *argv):
    """main(argv) -> (exit code, stdout, stderr); argparse exits are caught."""
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_bad_argument(capsys, argv, argument, expected, received):
    code, out, err = run(capsys, *argv)
    assert code == 2, (code, out, err)
    assert f"argument {argument}" in err
    assert expected in err
    assert received in err


# ---------------------------------------------------------------- entry point and --help
def test_console_script_runs_main_and_exits_through_exit_process():
    # `console` is `main` plus a process's exit without the seconds of freeing what it compiled
    (script,) = importlib.metadata.entry_points(group="console_scripts", name="kernelgym")
    assert script.load() is console
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from kernelgym.cli.main import console; sys.argv[1:] = ['list']; console()",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0 and "CartPole-v1" in completed.stdout, completed.stderr


def test_module_runs_as_a_command():
    completed = subprocess.run(
        [sys.executable, "-m", "kernelgym.cli.main", "--help"], capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0
    for name in SUBCOMMANDS:
        assert name in completed.stdout


@pytest.mark.parametrize("subcommand", SUBCOMMANDS)
def test_every_subcommand_has_help(capsys, subcommand):
    code, out, _ = run(capsys, subcommand, "--help")
    assert code == 0
    assert out.startswith(f"usage: kernelgym {subcommand}")


def test_missing_subcommand_is_an_error(capsys):
    code, _, err = run(capsys)
    assert code == 2 and "COMMAND" in err


def test_unknown_subcommand_is_an_error_naming_the_choices(capsys):
    code, _, err = run(capsys, "train")
    assert code == 2 and "'train'" in err and "demo" in err


# ------------------------------------------------------------------- argument types
@given(st.integers(min_value=1, max_value=10**9))
def test_positive_int_accepts_positive_integers(value):
    assert cli.positive_int(str(value)) == value


@given(st.one_of(st.integers(max_value=0).map(str), st.text(alphabet="abc.-x ", min_size=1)))
def test_positive_int_rejects_others_saying_what_it_received(text):
    with pytest.raises(Exception) as error:
        cli.positive_int(text)
    assert "expected an integer >= 1" in str(error.value) and repr(text) in str(error.value)


@given(st.floats(max_value=0.0) | st.just(float("inf")) | st.just(float("nan")))
def test_positive_float_rejects_non_positive_and_non_finite(value):
    with pytest.raises(Exception) as error:
        cli.positive_float(str(value))
    assert "expected a number > 0" in str(error.value)


# -------------------------------------------------------------------------------- list
def test_list_shows_builtin_envs_with_provider_spaces_and_agents(capsys):
    import kernelgym.envs as kge

    code, out, _ = run(capsys, "list")
    assert code == 0
    for env_id in kge.list_envs():
        assert env_id in out
    spec = kge.get_spec("CartPole-v1")
    lines = out.splitlines()
    at = next(index for index, line in enumerate(lines) if "CartPole-v1" in line)
    for cell in ("Box(4,) float32", "Discrete(2)", " 1 "):
        assert cell in lines[at]
    assert lines[at + 1].startswith(f"{spec.plugin} ({spec.distribution})"), lines[at + 1]  # the provider, under the id


def test_list_fits_80_columns_with_every_id_and_provider_whole():
    from io import StringIO

    from rich.console import Console

    import kernelgym.envs as kge
    from kernelgym.cli.env_table import print_env_table

    console = Console(file=StringIO(), width=80)
    print_env_table(console)
    lines = console.file.getvalue().splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    words = {word for line in lines for word in line.split()}
    for env_id in kge.list_envs():
        spec = kge.get_spec(env_id)
        assert any(line.startswith(env_id + " ") for line in lines), env_id
        assert spec.plugin in words and f"({spec.distribution})" in words, (spec.plugin, spec.distribution)


def test_list_survives_a_plugin_that_exits_and_two_that_claim_one_id(tmp_path):
    import os
    import textwrap

    plugin = textwrap.dedent("""
        import dataclasses
        from kernelgym.envs.classic import cartpole
        from kernelgym.envs.hookspecs import hookimpl

        @hookimpl
        def kernelgym_register_envs():
            return [dataclasses.replace(cartpole.SPEC, id="Clash-v0")]
    """)
    for name, source in (("exits", "import sys\nsys.exit(5)\n"), ("clash_a", plugin), ("clash_b", plugin)):
        (tmp_path / f"{name}.py").write_text(source)
        info = tmp_path / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[kernelgym.envs]\n{name} = {name}\n")
    completed = subprocess.run(
        [sys.executable, "-m", "kernelgym.cli", "list"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert completed.returncode == 0, completed.stderr
    assert "Traceback" not in completed.stderr
    assert "CartPole-v1" in completed.stdout and "Clash-v0" not in completed.stdout
    assert "clash_a" in completed.stderr and "clash_b" in completed.stderr and "sys.exit(5)" in completed.stderr


def test_describe_space_is_short():
    from gymnasium import spaces

    from kernelgym.cli.env_table import describe_space

    assert describe_space(spaces.Discrete(5)) == "Discrete(5)"
    assert describe_space(spaces.MultiDiscrete([10, 10])) == "MultiDiscrete([10, 10])"
    assert describe_space(spaces.Box(-1, 1, (3, 2))) == "Box(3, 2) float32"
    assert describe_space(spaces.MultiBinary(3)) == "MultiBinary(3)"
    nested = spaces.Dict(
        {
            "image": spaces.Box(0, 1, (2, 5, 5), "uint8"),
            "more": spaces.Tuple((spaces.Discrete(3), spaces.MultiBinary(2))),
        }
    )
    assert describe_space(nested) == "Dict(image: Box(2, 5, 5) uint8, more: Tuple(Discrete(3), MultiBinary(2)))"


# ------------------------------------------------------------------------------- bench
def test_bench_measures_both_sides_and_writes_a_plot(capsys, tmp_path):
    plot = tmp_path / "throughput.png"
    code, out, _ = run(
        capsys,
        "bench",
        "CartPole-v1",
        "--num-envs",
        "16",
        "64",
        "--steps",
        "20",
        "--repeats",
        "2",
        "--backend",
        "cpu",
        "--plot",
        str(plot),
    )
    assert code == 0
    rows = [line for line in out.splitlines() if "CartPoleVectorEnv" in line]
    assert len(rows) == 2 and "16" in rows[0] and "64" in rows[1]
    assert all("x" in row.split("│")[-2] for row in rows)  # a ratio in every row
    assert plot.read_bytes().startswith(PNG_MAGIC)
    assert imread(plot).shape[2] in (3, 4)


def test_bench_rows_hold_positive_medians_and_consistent_ratios():
    from kernelgym.cli.throughput import bench_env

    bench = bench_env("CartPole-v1", [8], backend="cpu", steps=10, repeats=3, progress=False)
    (row,) = bench.rows
    assert row.num_envs == 8 and row.kernelgym_steps_per_s > 0 and row.gymnasium_steps_per_s > 0
    assert row.ratio == pytest.approx(row.kernelgym_steps_per_s / row.gymnasium_steps_per_s)
    for rates in (row.kernelgym, row.gymnasium):
        assert 0 < rates.min <= rates.median <= rates.max and rates.spread >= 1
    assert bench.load_at_start >= 0 and bench.load_at_end >= 0


@pytest.mark.parametrize("strategy", ["adaptive", "one"])
def test_bench_says_which_cpu_threading_strategy_ran(monkeypatch, strategy):
    from io import StringIO

    from rich.console import Console

    from kernelgym.cli.throughput import bench_env, print_throughput_table

    monkeypatch.setenv("KERNELGYM_CPU_THREADS", strategy)
    bench = bench_env("CartPole-v1", [256], backend="cpu", steps=10, repeats=2, with_gymnasium=False, progress=False)
    console = Console(file=StringIO(), width=300)
    print_throughput_table("CartPole-v1", "cpu", bench, console=console)
    out = console.file.getvalue()
    assert f"cpu threads: KERNELGYM_CPU_THREADS={strategy}: " in out and "numba layer" in out
    (row,) = bench.rows
    if strategy == "adaptive":  # every launch of 256 envs was adaptive: the share is known
        assert row.team_share is not None and 0 <= row.team_share <= 1
        assert f"the thread team ran {row.team_share:.0%} at 256 envs of the launches" in out
    else:
        assert row.team_share is None and "1 thread per launch" in out and "thread team ran" not in out


def _bench_with_spread(spread):
    from kernelgym.cli.throughput import Bench, Rates, Throughput

    rows = [Throughput(16, Rates(100.0, 120.0, 100.0 * spread), Rates(10.0, 11.0, 12.0), "CartPoleVectorEnv")]
    return Bench(rows, load_at_start=0.25, load_at_end=1.5)


@given(spread=st.floats(1.0, 10.0))
def test_bench_table_shows_min_median_max_and_load_and_warns_on_a_large_spread(spread):
    from io import StringIO

    from rich.console import Console

    from kernelgym.cli.throughput import SPREAD_WARNING, print_throughput_table

    console = Console(file=StringIO(), width=200)
    print_throughput_table("CartPole-v1", "cpu", _bench_with_spread(spread), console=console)
    out = console.file.getvalue()
    assert "120 (100-" in out and "11 (10-12)" in out and "min-max" in out
    assert "load average (1 min) at start 0.25, at end 1.50" in out
    assert ("WARNING" in out) == (spread > SPREAD_WARNING)
    if spread > SPREAD_WARNING:
        assert f"{spread:.1f}x" in out


@pytest.mark.parametrize("num_envs", [[16], [16, 64]])
def test_throughput_plot_is_a_bar_chart_for_one_num_envs_and_a_line_plot_otherwise(tmp_path, num_envs):
    from kernelgym.cli.plots import plot_throughput
    from kernelgym.cli.throughput import Rates, Throughput

    rows = [Throughput(n, Rates(90.0, 100.0, 110.0), Rates(9.0, 10.0, 11.0), "CartPoleVectorEnv") for n in num_envs]
    figure = plot_throughput("CartPole-v1", "cpu", rows, str(tmp_path / "plot.png"))
    (axes,) = figure.axes
    bars = [patch for patch in axes.patches if patch.get_height() > 0]
    if len(num_envs) == 1:
        assert sorted(bar.get_height() for bar in bars) == [10.0, 100.0]
        assert [label.get_text() for label in axes.get_xticklabels()] == [
            "kernelgym (cpu)",
            "gymnasium (CartPoleVectorEnv)",
        ]
    else:
        assert not bars and len(axes.get_legend().get_texts()) == 2
    assert (tmp_path / "plot.png").read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize("command", [["bench", "CartPole-v1", "--backend", "cpu", "--plot"], ["demo", "--out"]])
@pytest.mark.parametrize("where", ["missing-folder/out.png", "a-folder.png"])
def test_output_paths_are_checked_before_any_work(capsys, tmp_path, command, where):
    (tmp_path / "a-folder.png").mkdir()
    path = str(tmp_path / where)
    problem = f"folder {str(tmp_path / 'missing-folder')!r} does not exist" if "missing" in where else "it is a folder"
    code, out, err = run(capsys, *command, path)
    assert code == 2 and out == ""  # nothing measured or trained
    assert f"argument {command[-1]}: expected a writable .png file path ({problem})" in " ".join(err.split())
    assert repr(path) in err


def test_ctrl_c_prints_one_line_and_exits_130_without_a_traceback():
    import os
    import signal
    import time

    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kernelgym.cli",
            "bench",
            "CartPole-v1",
            "--num-envs",
            "64",
            "--steps",
            "1000000",
            "--repeats",
            "100",
            "--backend",
            "cpu",
            "--no-gymnasium",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        # Ctrl-C's default action, as in a terminal: a runner started in the background (nohup,
        # `&`) ignores SIGINT, its children inherit that, and Python then sets no handler
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # tqdm draws its bar (on stderr) once the command is measuring
    seen = ""
    while "bench CartPole-v1" not in seen:
        seen += os.read(process.stderr.fileno(), 4096).decode()
        assert process.poll() is None, seen
    time.sleep(0.5)  # into the measuring loop (no assertion depends on this)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert [line for line in err.splitlines() if "interrupted" in line] == ["kernelgym bench: interrupted"]


def test_bench_without_gymnasium_counterpart_says_so(capsys):
    code, out, _ = run(
        capsys,
        "bench",
        "CartPole-v1",
        "--num-envs",
        "8",
        "--steps",
        "5",
        "--repeats",
        "1",
        "--backend",
        "cpu",
        "--no-gymnasium",
    )
    assert code == 0
    assert "n/a" in out and "CartPoleVectorEnv" not in out


@pytest.mark.parametrize(
    ("argv", "argument", "expected", "received"),
    [
        (["--num-envs", "0"], "--num-envs", "expected an integer >= 1", "'0'"),
        (["--num-envs", "many"], "--num-envs", "expected an integer >= 1", "'many'"),
        (["--steps", "-5"], "--steps", "expected an integer >= 1", "'-5'"),
        (["--repeats", "1.5"], "--repeats", "expected an integer >= 1", "'1.5'"),
        (["--backend", "gpu"], "--backend", "choose from", "'gpu'"),
        (["--plot", "curve.jpg"], "--plot", "expected a file name ending in .png", "'curve.jpg'"),
    ],
)
def test_bench_bad_arguments(capsys, argv, argument, expected, received):
    assert_bad_argument(capsys, ["bench", "CartPole-v1", *argv], argument, expected, received)


def test_bench_unknown_env_names_the_registered_ones(capsys):
    code, _, err = run(capsys, "bench", "CartPole-v9")
    assert code == 2
    assert "argument ENV" in err and "expected one of the registered envs" in err
    assert "'CartPole-v9'" in err and "'CartPole-v1'" in err


def test_bench_on_missing_gpu_is_a_clear_error(capsys):
    from kernelgym.core import BackendUnavailableError, resolve_backend

    try:
        resolve_backend("cuda")
    except BackendUnavailableError:
        assert_bad_argument(
            capsys, ["bench", "CartPole-v1", "--backend", "cuda"], "--backend", "not available here", "'cuda'"
        )
    else:
        pytest.skip("a usable GPU is present, so --backend cuda is valid here")


# ------------------------------------------------------------------------------- check
def test_check_prints_the_kits_report_and_exits_by_its_verdict(capsys):
    code, out, _ = run(
        capsys, "check", "CartPole-v1", "--max-examples", "2", "--checks", "parity,autoreset", "--seed", "7"
    )
    assert "CartPole-v1" in out and "seed 7" in out
    assert "parity" in out and "autoreset" in out and "stateful" not in out
    verdict = "PASSED" if code == 0 else "FAILED"
    assert code in (0, 1) and verdict in out


def test_check_precision_runs_that_precision_and_the_report_says_so(capsys):
    code, out, err = run(
        capsys,
        "check",
        "CartPole-v1",
        "--precision",
        "float32",
        "--max-examples",
        "2",
        "--checks",
        "parity",
        "--seed",
        "3",
    )
    assert code == 0, out + err
    assert "backend cpu, precision float32; 2 hypothesis examples per check, seed 3" in out, out


def test_check_help_states_the_example_counts_the_kit_runs(capsys):
    from kernelgym.envs.testing import DEFAULT_MAX_EXAMPLES

    code, out, _ = run(capsys, "check", "--help")
    out = " ".join(out.split())
    assert code == 0
    assert f"default: {DEFAULT_MAX_EXAMPLES['cpu']}, {DEFAULT_MAX_EXAMPLES['sim']} on sim" in out, out
    assert "--precision {float64,float32}" in out and "--fast-math" in out


@pytest.mark.parametrize(
    ("argv", "argument", "expected", "received"),
    [
        (["NoSuchEnv-v0"], "ENV", "expected one of the registered envs", "'NoSuchEnv-v0'"),
        (["CartPole-v1", "--checks", "parity,speed"], "--checks", "expected names among", "['speed']"),
        (["CartPole-v1", "--max-examples", "0"], "--max-examples", "expected an integer >= 1", "'0'"),
        (["CartPole-v1", "--seed", "-1"], "--seed", "expected an integer >= 0", "'-1'"),
        (["CartPole-v1", "--backend", "tpu"], "--backend", "choose from", "'tpu'"),
        (["CartPole-v1", "--precision", "float16"], "--precision", "choose from", "'float16'"),
        (
            ["GoRight-v0", "--precision", "float32"],
            "--precision",
            "expected no --precision for GoRight-v0",
            "'float32'",
        ),
    ],
)
def test_check_bad_arguments(capsys, argv, argument, expected, received):
    assert_bad_argument(capsys, ["check", *argv], argument, expected, received)


# -------------------------------------------------------------------------------- demo
@pytest.mark.parametrize(
    ("argv", "argument", "expected", "received"),
    [
        (["--num-envs", "-3"], "--num-envs", "expected an integer >= 1", "'-3'"),
        (["--time-limit", "0"], "--time-limit", "expected a number > 0", "'0'"),
        (["--target-return", "abc"], "--target-return", "expected a number > 0", "'abc'"),
        (["--out", "curve.svg"], "--out", "expected a file name ending in .png", "'curve.svg'"),
        (["--seed", "one"], "--seed", "expected an integer >= 0", "'one'"),
    ],
)
def test_demo_bad_arguments(capsys, argv, argument, expected, received):
    assert_bad_argument(capsys, ["demo", *argv], argument, expected, received)


def test_demo_short_run_reports_outcome_and_writes_learning_curve(capsys, tmp_path):
    out_png = tmp_path / "curve.png"
    code, out, _ = run(
        capsys,
        "demo",
        "--max-env-steps",
        "8192",
        "--num-envs",
        "32",
        "--no-progress",
        "--backend",
        "cpu",
        "--out",
        str(out_png),
    )
    assert code == 1  # 8192 steps cannot solve CartPole: the exit code says the target was missed
    assert "did NOT reach the target mean return 475" in out
    assert "8,192 env steps" in out and f"written to {out_png}" in out
    assert out_png.read_bytes().startswith(PNG_MAGIC)


def test_demo_defaults_are_the_ppo_configs():
    from kernelgym.cli.ppo import PPOConfig

    args = cli.build_parser().parse_args(["demo"])
    config = PPOConfig()
    assert (args.seed, args.backend, args.num_envs) == (config.seed, config.backend, config.num_envs)
    assert (args.target_return, args.max_env_steps, args.time_limit) == (
        config.target_return,
        config.max_env_steps,
        config.time_limit_s,
    )


def test_list_with_broken_plugins_prints_the_valid_envs_and_the_warnings(tmp_path):
    import os
    import textwrap

    def provides(*ids):
        return textwrap.dedent(f"""
            import dataclasses
            from kernelgym.envs.classic import cartpole
            from kernelgym.envs.hookspecs import hookimpl

            @hookimpl
            def kernelgym_register_envs():
                return [dataclasses.replace(cartpole.SPEC, id=env_id) for env_id in {list(ids)!r}]
        """)

    distributions = {
        "mixed": (provides("Bad Id-v0", "Kept-v0"), ["Bad Declared-v0"]),
        "foo_a": (provides("Foo"), ["Foo"]),
        "foo_b": (provides("Foo-v0"), []),
    }
    for name, (source, ids) in distributions.items():
        (tmp_path / f"{name}.py").write_text(source)
        info = tmp_path / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        declared = "".join(f"{env_id} = {name}\n" for env_id in ids)
        (info / "entry_points.txt").write_text(f"[kernelgym.envs]\n{name} = {name}\n[kernelgym.envs.ids]\n{declared}")
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])  # plugins, then this tree
    completed = subprocess.run(
        [sys.executable, "-m", "kernelgym.cli", "list"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert completed.returncode == 0, completed.stderr
    assert "Traceback" not in completed.stderr
    listed = {line.split()[0] for line in completed.stdout.splitlines() if line.strip()}
    assert {"CartPole-v1", "Kept-v0"} <= listed and not {"Foo", "Foo-v0", "Bad"} & listed, completed.stdout
    for texts in (
        ("'Bad Declared-v0'", "'mixed'", "Malformed"),
        ("'Bad Id-v0'", "'mixed'", "Malformed"),
        ("'Foo'", "'Foo-v0'", "'foo_a'", "'foo_b'"),
    ):
        assert any(all(text in line for text in texts) for line in completed.stderr.splitlines()), texts
