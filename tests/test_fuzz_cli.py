"""Issue 25 fuzz of the `kernelgym` command: hostile options and paths, in-process `main(argv)`.

Each example builds an argv for a subcommand from valid and hostile values. The command
must not raise (no traceback): an argv holding a hostile value exits with code 2 and a
message naming one of the hostile arguments, before any work; an all-valid argv (only
cheap ones: `list`, a tiny `bench` on cpu) succeeds. An unusable KERNELGYM_CACHE_DIR is
covered where the cache is (packages/core/tests/test_fuzz_cache.py): a process-wide
setting, and any run under it compiles every kernel afresh.
"""

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelgym.cli.main import MAX_NUM_ENVS, MAX_SEED, main

HOSTILE_INTS = [
    "0",
    "-1",
    "-0x1",
    "1.5",
    "1e3",
    "nan",
    "inf",
    "-inf",
    "",
    " ",
    "one",
    "0x10",
    "9" * 40,
    str(2**64),
    str(-(2**63)),
    "\u0663\u0663x",
]
HOSTILE_NUMBERS = ["0", "-1", "nan", "inf", "-inf", "", "abc", "1e400", "-1e-300"]
HOSTILE_BACKENDS = ["gpu", "", "CPU", "tpu", "cpu "]
HOSTILE_ENVS = ["NoSuch-v0", "", "cartpole-v1", "../CartPole-v1", "CartPole-v1 ", "Cart\u00e9Pole-v1"]
HOSTILE_SEEDS = ["-1", str(MAX_SEED + 1), str(2**128), "1.0", "seed", ""]


def hostile_pngs(tmp):
    """Paths a PNG cannot be written to (tmp: a folder with `a-folder.png` made in it)."""
    return [
        "/proc/kernelgym-fuzz.png",
        os.path.join(tmp, "a-folder.png"),
        os.path.join(tmp, "missing", "x.png"),
        os.path.join(tmp, "x.jpg"),
        os.path.join(tmp, "x" * 300 + ".png"),
        os.path.join(tmp, "nul\x00.png"),
        "",
        ".png/",
        os.path.join(tmp, "a-folder.png", "..", "no", "y.png"),
    ]


def option(name, valid, hostile):
    """(argv part, hostile name or None) for one option: a valid value or a hostile one."""
    return st.one_of(
        valid.map(lambda value: ([name, value], None)),
        st.sampled_from(hostile).map(lambda value: ([name, value], name)),
    )


def bench_argv(tmp):
    return st.tuples(
        st.one_of(st.just((["CartPole-v1"], None)), st.sampled_from(HOSTILE_ENVS).map(lambda e: ([e], "ENV"))),
        option("--num-envs", st.integers(1, 8).map(str), HOSTILE_INTS + [str(MAX_NUM_ENVS + 1)]),
        option("--steps", st.integers(1, 3).map(str), HOSTILE_INTS),
        option("--repeats", st.just("1"), HOSTILE_INTS),
        option("--backend", st.just("cpu"), HOSTILE_BACKENDS),
        st.one_of(st.just(([], None)), st.just((["--no-gymnasium"], None))),
        st.one_of(st.just(([], None)), option("--plot", st.just(os.path.join(tmp, "plot.png")), hostile_pngs(tmp))),
    ).map(lambda parts: ("bench", parts))


def demo_argv(tmp):
    # a valid demo trains for minutes: every example holds one hostile value at least
    return (
        st.tuples(
            option("--seed", st.sampled_from(["0", str(MAX_SEED)]), HOSTILE_SEEDS),
            option("--num-envs", st.integers(1, 64).map(str), HOSTILE_INTS + [str(MAX_NUM_ENVS + 1)]),
            option("--target-return", st.just("10"), HOSTILE_NUMBERS),
            option("--time-limit", st.just("5"), HOSTILE_NUMBERS),
            option("--max-env-steps", st.just("64"), HOSTILE_INTS),
            option("--backend", st.just("cpu"), HOSTILE_BACKENDS),
            option("--out", st.just(os.path.join(tmp, "curve.png")), hostile_pngs(tmp)),
        )
        .filter(lambda parts: any(name for _, name in parts))
        .map(lambda parts: ("demo", parts))
    )


def check_argv(tmp):
    return (
        st.tuples(
            st.one_of(st.just((["CartPole-v1"], None)), st.sampled_from(HOSTILE_ENVS).map(lambda e: ([e], "ENV"))),
            option("--seed", st.sampled_from(["0", str(MAX_SEED)]), HOSTILE_SEEDS),
            option("--max-examples", st.just("1"), HOSTILE_INTS),
            option("--checks", st.just("parity"), ["", ",", "parity,speed", "nope"]),
            option("--backend", st.just("cpu"), HOSTILE_BACKENDS),
            st.one_of(
                st.just(([], None)),
                st.sampled_from(["float16", "", "double"]).map(lambda value: (["--precision", value], "--precision")),
            ),
        )
        .filter(lambda parts: any(name for _, name in parts))
        .map(lambda parts: ("check", parts))
    )


def compile_argv(tmp):
    # a valid compile makes envs for a minute on a cold cache: every example holds one hostile value at least
    return (
        st.tuples(
            st.one_of(st.just((["CartPole-v1"], None)), st.sampled_from(HOSTILE_ENVS).map(lambda e: ([e], "ENV"))),
            option("--num-envs", st.integers(1, 64).map(str), HOSTILE_INTS + [str(MAX_NUM_ENVS + 1)]),
            option("--backend", st.just("cpu"), HOSTILE_BACKENDS),
            option("--autoreset-mode", st.sampled_from(["next_step", "same_step", "both"]), ["", "Both", "never"]),
            st.one_of(
                st.just(([], None)),
                st.sampled_from(["float16", "", "double"]).map(lambda value: (["--precision", value], "--precision")),
            ),
        )
        .filter(lambda parts: any(name for _, name in parts))
        .map(lambda parts: ("compile", parts))
    )


def gpu_compile_argv(tmp):
    return st.sampled_from(HOSTILE_ENVS).map(lambda env_id: ("gpu-compile", (([env_id], "ENV"),)))


def run(capsys, argv):
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hostile_argv_exits_2_naming_an_argument_and_a_valid_one_succeeds(capsys, tmp_path, data):
    tmp = str(tmp_path)
    os.makedirs(os.path.join(tmp, "a-folder.png"), exist_ok=True)
    command, parts = data.draw(
        st.one_of(
            bench_argv(tmp),
            demo_argv(tmp),
            check_argv(tmp),
            compile_argv(tmp),
            gpu_compile_argv(tmp),
            st.just(("list", ())),
        )
    )
    parts = data.draw(st.permutations(parts)) if command != "bench" else parts  # bench: ENV first
    argv = [command] + [word for words, _ in parts for word in words]
    hostile = {name for _, name in parts if name}
    code, out, err = run(capsys, argv)
    if hostile:
        assert code == 2, (argv, code, out, err)
        message = " ".join(err.split())
        assert any(f"argument {name}" in message for name in hostile), (argv, err)
        assert out == "", (argv, out)  # nothing measured or trained
    else:
        assert code == 0, (argv, code, out, err)
        assert "CartPole-v1" in out
        plot = os.path.join(tmp, "plot.png")
        if "--plot" in argv:
            assert f"plot written to {plot}" in out and os.path.getsize(plot) > 0
            os.remove(plot)
