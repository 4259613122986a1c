"""Plugins load lazily, without an import cycle, and one bad plugin never takes the others down."""

import ast
import graphlib
import os
import pathlib
import subprocess
import sys
import textwrap
import types
import warnings

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_registry import _toy_spec

from kernelgym.envs import hookspecs, registry
from kernelgym.envs.hookspecs import hookimpl

ENVS_SOURCE = pathlib.Path(registry.__file__).parent


def _run(code, **env):
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return result


# ------------------------------------------------------------------ lazy, no cycle
def test_importing_kernelgym_envs_imports_no_plugin_until_one_is_asked_for():
    out = _run("""
        import sys
        from importlib.metadata import entry_points
        import gymnasium
        import kernelgym.envs

        plugins = {ep.value for ep in entry_points(group="kernelgym.envs")}
        assert "kernelgym.envs.classic.cartpole" in plugins
        lazy = plugins | {"kernelgym.envs.vector_env", "kernelgym.envs.gymnasium_adapter", "numba", "torch"}
        assert not lazy & set(sys.modules), sorted(lazy & set(sys.modules))
        assert "kernelgym/CartPole-v1" in gymnasium.registry  # declared ids are known to gymnasium

        envs = gymnasium.make_vec("kernelgym/CartPole-v1", num_envs=3, vectorization_mode="vector_entry_point",
                                  backend="cpu")
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (3, 4)
        envs.step(envs.action_space.sample())
        assert "kernelgym.envs.classic.cartpole" in sys.modules
        print("ok")
    """).stdout
    assert out.strip() == "ok"


def test_a_declared_id_gets_its_time_limit_when_gymnasium_makes_it_first():
    out = _run("""
        import gymnasium
        import kernelgym.envs

        assert gymnasium.spec("kernelgym/CartPole-v1").max_episode_steps is None  # no plugin loaded yet
        env = gymnasium.make("kernelgym/CartPole-v1")  # creating the env loads the plugin
        assert isinstance(env, gymnasium.wrappers.TimeLimit) and env.spec.max_episode_steps == 500
        assert gymnasium.spec("kernelgym/CartPole-v1").max_episode_steps == 500
        print("ok")
    """).stdout
    assert out.strip() == "ok"


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ENVS_SOURCE.parent).with_suffix("").parts
    return ".".join(("kernelgym", *parts)).removesuffix(".__init__")


def test_no_import_cycle_between_the_modules_of_kernelgym_envs():
    files = {_module_name(path): path for path in ENVS_SOURCE.rglob("*.py")}
    graph = {}
    for module, path in files.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):  # function-level imports count too
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    imported.add(submodule if submodule in files else node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
        graph[module] = {name for name in imported if name in files and name != module}
    assert "kernelgym.envs.gymnasium_registration" in graph["kernelgym.envs"]
    list(graphlib.TopologicalSorter(graph).static_order())  # raises CycleError naming the cycle


# --------------------------------------------------------- bad plugins, in any mix
def _module(name, hook):
    module = types.ModuleType(name)
    module.kernelgym_register_envs = hookimpl(hook)
    return module


def _good(ids):
    return lambda: [_toy_spec(env_id) for env_id in ids]


def _raises(error):
    def hook():
        raise error

    return hook


PLUGIN_KINDS = st.one_of(
    st.tuples(st.just("good"), st.lists(st.sampled_from(["A-v0", "B-v0", "C-v0", "D-v0"]), max_size=3, unique=True)),
    st.tuples(st.just("raises"), st.sampled_from([RuntimeError("broken"), SystemExit(2), SystemExit("bye")])),
    st.tuples(st.just("junk"), st.just(["not a spec"])),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plugins=st.lists(PLUGIN_KINDS, max_size=6))
def test_any_mix_of_good_and_bad_plugins_keeps_every_id_claimed_once(plugins, monkeypatch):
    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    monkeypatch.delenv(registry.NO_AUTOLOAD_ENV_VAR, raising=False)
    reg = registry._Registry()
    claims, bad = {}, []
    for index, (kind, payload) in enumerate(plugins):
        name = f"plugin{index}"
        if kind == "good":
            hook = _good(payload)
            for env_id in payload:
                claims.setdefault(env_id, []).append(name)
        elif kind == "raises":
            hook, _ = _raises(payload), bad.append(name)
        else:
            hook, _ = (lambda junk=payload: junk), bad.append(name)
        reg.register(_module(name, hook), name=name, distribution=f"dist-{index}")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        specs = reg.specs()
    messages = [str(w.message) for w in caught if issubclass(w.category, registry.PluginLoadWarning)]

    # the reference: an id claimed by exactly one good plugin is served by it, others are left out
    expected = {env_id: names[0] for env_id, names in claims.items() if len(names) == 1}
    assert {env_id: spec.plugin for env_id, spec in specs.items()} == expected
    for name in bad:
        assert any(repr(name) in message for message in messages), (name, messages)
    for env_id, names in claims.items():
        if len(names) > 1:
            assert reg.conflict(env_id) == [(name, f"dist-{name.removeprefix('plugin')}") for name in names]
            warning = next(message for message in messages if repr(env_id) in message)
            assert all(f"dist-{name.removeprefix('plugin')}" in warning for name in names)
    assert len(messages) == len(bad) + sum(len(names) > 1 for names in claims.values())


# ------------------------------------------- real installed plugins, in a fresh process
def _install_fake_distribution(site, name, module_source, ids=()):
    """A distribution importlib.metadata finds on sys.path: a dist-info with entry points and its module."""
    module = name.replace("-", "_")
    (site / f"{module}.py").write_text(textwrap.dedent(module_source))
    info = site / f"{module}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = [f"[{hookspecs.ENTRY_POINT_GROUP}]", f"{module} = {module}", f"[{hookspecs.ID_ENTRY_POINT_GROUP}]"]
    lines += [f"{env_id} = {module}" for env_id in ids]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


CLASHING_PLUGIN = """
    import dataclasses
    from kernelgym.envs.classic import cartpole
    from kernelgym.envs.hookspecs import hookimpl

    @hookimpl
    def kernelgym_register_envs():
        return [dataclasses.replace(cartpole.SPEC, id="Clash-v0")]
"""


def test_an_exiting_plugin_and_two_clashing_plugins_leave_the_other_ids_working(tmp_path):
    _install_fake_distribution(tmp_path, "exits-at-import", "import sys\nsys.exit(7)\n")
    _install_fake_distribution(tmp_path, "clash-one", CLASHING_PLUGIN, ids=["Clash-v0"])
    _install_fake_distribution(tmp_path, "clash-two", CLASHING_PLUGIN, ids=["Clash-v0"])
    result = _run(
        """
        import warnings
        warnings.simplefilter("always")
        import gymnasium
        import kernelgym.envs as kge

        assert "CartPole-v1" in kge.list_envs() and "Clash-v0" not in kge.list_envs()
        assert kge.make("Pendulum-v1", 2, backend="cpu", seed=0).reset()[0].shape == (2, 3)
        envs = gymnasium.make_vec("kernelgym/Acrobot-v1", num_envs=2, vectorization_mode="vector_entry_point",
                                  backend="cpu")
        assert envs.reset(seed=0)[0].shape == (2, 6)
        try:
            kge.make("Clash-v0", 2, backend="cpu")
        except KeyError as error:
            assert "clash-one" in str(error) and "clash-two" in str(error), error
        else:
            raise AssertionError("a clashing id was made")
        print("survived")
    """,
        PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
    )
    assert result.stdout.strip() == "survived"
    assert "exits_at_import" in result.stderr and "sys.exit(7)" in result.stderr
    assert "'Clash-v0' is claimed by 2 plugins" in result.stderr and "clash-two" in result.stderr


# ------------------------------- any mix of specs: each bad one hides only itself
SPEC_ITEMS = st.one_of(
    st.sampled_from(["A-v0", "A-v1", "A", "B-v0", "B", "C-v0"]).map(lambda env_id: ("good", env_id)),
    st.sampled_from(["Bad Id-v0", "Bad-v01"]).map(lambda env_id: ("bad id", env_id)),
    st.just(("junk", "not a spec")),
)


def _gymnasium_name(env_id):
    name, _, version = env_id.rpartition("-v")
    return (name, version) if name else (env_id, None)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plugins=st.lists(st.lists(SPEC_ITEMS, max_size=4), max_size=4))
def test_any_mix_of_specs_keeps_each_good_id_that_one_plugin_claims_and_gymnasium_can_hold(plugins, monkeypatch):
    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    monkeypatch.delenv(registry.NO_AUTOLOAD_ENV_VAR, raising=False)
    reg = registry._Registry()
    claims, bad_items = {}, []
    for index, items in enumerate(plugins):
        name = f"plugin{index}"
        provided = [item if kind == "junk" else _toy_spec(item) for kind, item in items]
        reg.register(_module(name, lambda provided=provided: provided), name=name, distribution=f"dist-{index}")
        for kind, item in items:
            if kind == "good":
                claims.setdefault(item, []).append(name)
            else:
                bad_items.append((name, item))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        specs = reg.specs()
    messages = [str(w.message) for w in caught if issubclass(w.category, registry.PluginLoadWarning)]

    # the reference: group the good ids by gymnasium's name; a group holding an unversioned
    # and a versioned id is left out whole, otherwise an id claimed once is served
    groups = {}
    for env_id in claims:
        groups.setdefault(_gymnasium_name(env_id)[0], []).append(env_id)
    colliding = [ids for ids in groups.values() if len({_gymnasium_name(i)[1] is None for i in ids}) == 2]
    left_out = {env_id for ids in colliding for env_id in ids}
    expected = {env_id: names[0] for env_id, names in claims.items() if len(names) == 1 and env_id not in left_out}
    assert {env_id: spec.plugin for env_id, spec in specs.items()} == expected
    for name, item in bad_items:  # each bad item has a warning naming it and its plugin
        assert any(repr(name) in message and repr(item) in message for message in messages), (name, item)
    for ids in colliding:
        assert any(
            all(repr(env_id) in message for env_id in ids) and "collide in gymnasium" in message for message in messages
        ), (ids, messages)
    duplicates = [env_id for env_id, names in claims.items() if len(names) > 1 and env_id not in left_out]
    assert len(messages) == len(bad_items) + len(colliding) + len(duplicates)


# ----------- third-party ids never break the import, other envs or gymnasium.make
def test_malformed_and_colliding_ids_of_real_distributions_leave_every_other_env_working(tmp_path):
    def provides(*ids):
        return (
            "import dataclasses\nfrom kernelgym.envs.classic import cartpole\n"
            "from kernelgym.envs.hookspecs import hookimpl\n\n@hookimpl\ndef kernelgym_register_envs():\n"
            f"    return [dataclasses.replace(cartpole.SPEC, id=env_id) for env_id in {list(ids)!r}]\n"
        )

    _install_fake_distribution(
        tmp_path, "declares-a-bad-id", provides("Declared-v0"), ids=["Bad Declared-v0", "Declared-v0"]
    )
    _install_fake_distribution(tmp_path, "provides-a-bad-id", provides("Bad Spec-v0", "Kept-v0"))
    _install_fake_distribution(tmp_path, "foo-unversioned", provides("Foo"), ids=["Foo"])
    _install_fake_distribution(tmp_path, "foo-versioned", provides("Foo-v0"), ids=["Foo-v0"])
    result = _run(
        """
        import warnings
        warnings.simplefilter("always")
        import gymnasium
        import kernelgym.envs as kge

        assert "kernelgym/Foo" not in gymnasium.registry and "kernelgym/Foo-v0" not in gymnasium.registry
        env = gymnasium.make("kernelgym/CartPole-v1")  # loads every plugin: nothing of theirs raises
        assert env.reset(seed=0)[0].shape == (4,)
        assert kge.make("Pendulum-v1", 2, backend="cpu", seed=0).reset()[0].shape == (2, 3)
        ids = kge.list_envs()
        assert {"CartPole-v1", "Declared-v0", "Kept-v0"} <= set(ids), ids
        assert not {"Foo", "Foo-v0", "Bad Spec-v0", "Bad Declared-v0"} & set(ids), ids
        assert gymnasium.make("kernelgym/Kept-v0").reset(seed=0)[0].shape == (4,)
        try:
            kge.make("Foo-v0", 2, backend="cpu")
        except KeyError as error:
            assert "foo-unversioned" in str(error) and "foo-versioned" in str(error), error
        else:
            raise AssertionError("a colliding id was made")
        print("survived")
    """,
        PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
    )
    assert result.stdout.strip() == "survived"
    lines = result.stderr.splitlines()

    def warning(*texts):
        return next((line for line in lines if all(text in line for text in texts)), None)

    assert warning("'Bad Declared-v0'", "declares-a-bad-id", "Malformed environment ID"), result.stderr
    assert warning("'Bad Spec-v0'", "provides-a-bad-id", "Malformed environment ID"), result.stderr
    assert warning("'Foo'", "'Foo-v0'", "foo-unversioned", "foo-versioned", "collide in gymnasium"), result.stderr
    assert "Traceback" not in result.stderr


def test_an_id_gymnasium_refuses_after_the_checks_is_left_out_of_gymnasium_only():
    # gymnasium already holds the versioned "Taken-v0" (registered by someone else), so it
    # refuses the unversioned "Taken": kernelgym keeps the id, gymnasium leaves it out
    out = _run(
        """
        import warnings
        import gymnasium
        import kernelgym.envs as kge
        from kernelgym.envs import registry
        from test_registry import _plugin, _toy_spec

        gymnasium.register("kernelgym/Taken-v0", entry_point="gymnasium.envs.classic_control:CartPoleEnv")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            kge.register_plugin(_plugin(_toy_spec("Taken"), _toy_spec("Other-v0")), name="taker")
        (message,) = [str(w.message) for w in caught if w.category is registry.PluginLoadWarning]
        assert "'Taken'" in message and "kernelgym/Taken" in message and "unversioned" in message, message
        assert "kernelgym/Taken" not in gymnasium.registry and "kernelgym/Other-v0" in gymnasium.registry
        assert kge.make("Taken", 2, backend="cpu", seed=0).reset()[0].shape == (2, 4)
        assert gymnasium.make("kernelgym/CartPole-v1").reset(seed=0)[0].shape == (4,)
        print("ok")
    """,
        PYTHONPATH=os.pathsep.join([str(pathlib.Path(__file__).parent), os.environ.get("PYTHONPATH", "")]),
    )
    assert out.stdout.strip() == "ok"


def test_gymnasium_make_of_an_id_two_undeclaring_plugins_claim_names_both_distributions(tmp_path):
    # gymnasium once said the id "doesn't exist": it was never registered there
    clash = CLASHING_PLUGIN.replace("Clash-v0", "Twice-v0")
    collide = CLASHING_PLUGIN.replace(
        'id="Clash-v0")]', 'id="Pair")] + [dataclasses.replace(cartpole.SPEC, id="Pair-v0")]'
    )
    _install_fake_distribution(tmp_path, "twice-one", clash)
    _install_fake_distribution(tmp_path, "twice-two", clash)
    _install_fake_distribution(tmp_path, "pair-maker", collide)
    result = _run(
        """
        import gymnasium
        import kernelgym.envs as kge

        assert "Twice-v0" not in kge.list_envs()
        for make in (lambda: gymnasium.make("kernelgym/Twice-v0"),
                     lambda: gymnasium.make_vec("kernelgym/Twice-v0", num_envs=2),
                     lambda: gymnasium.make_vec("kernelgym/Twice-v0", num_envs=2, vectorization_mode="sync")):
            try:
                make()
            except KeyError as error:
                assert "twice-one" in str(error) and "twice-two" in str(error), error
            else:
                raise AssertionError("an id two plugins claim was made")
        for pair_id in ("kernelgym/Pair", "kernelgym/Pair-v0"):
            try:
                gymnasium.make(pair_id)
            except (KeyError, gymnasium.error.Error) as error:
                assert "Pair" in str(error), error
            else:
                raise AssertionError("a colliding id was made")
        assert kge.make("CartPole-v1", 2, backend="cpu", seed=0).reset()[0].shape == (2, 4)
        print("named")
    """,
        PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
    )
    assert result.stdout.strip() == "named"


def test_an_id_a_declaring_plugin_provides_undeclared_is_warned_about_and_the_plugin_listed(tmp_path):
    # the kernelgym command refuses undeclared ids without loading plugins that declare ids
    second = 'id="Declared-v0"), dataclasses.replace(cartpole.SPEC, id="Hidden-v0")]'
    two_ids = CLASHING_PLUGIN.replace('id="Clash-v0")]', second)
    _install_fake_distribution(tmp_path, "declares-one", two_ids, ids=["Declared-v0"])
    _install_fake_distribution(tmp_path, "declares-none", CLASHING_PLUGIN)
    result = _run(
        """
        import warnings
        warnings.simplefilter("always")
        import kernelgym.envs as kge
        from kernelgym.envs.registry import undeclaring_plugins

        print(undeclaring_plugins())
        assert {"Declared-v0", "Hidden-v0", "Clash-v0"} <= set(kge.list_envs())
    """,
        PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
    )
    assert result.stdout.strip() == "['declares_none = declares_none']", result.stdout
    warned = [line for line in result.stderr.splitlines() if "'Hidden-v0'" in line]
    assert warned and "not declared" in warned[0] and "['Declared-v0']" in warned[0], result.stderr
    assert not any("'Clash-v0'" in line for line in result.stderr.splitlines()), result.stderr


def test_make_of_a_declared_id_loads_only_its_plugin_and_gymnasium_gets_its_time_limit():
    result = _run("""
        import sys
        import gymnasium
        import kernelgym.envs as kge

        env = kge.make("CartPole-v1", 2, backend="cpu", seed=0)
        # kernelgym-envs' own plugin modules: this test's env installs no other distribution
        others = ("kernelgym.envs.classic.acrobot", "kernelgym.envs.tag.continuous", "kernelgym.envs.tag.gridworld")
        print(sorted(name for name in others if name in sys.modules))
        print(gymnasium.spec("kernelgym/CartPole-v1").max_episode_steps, env.spec.plugin, env.spec.distribution)
        assert {"Acrobot-v1", "TagContinuous-v0", "TagGridWorld-v0"} <= set(kge.list_envs())
        print(sorted(name for name in others if name in sys.modules) == sorted(others))
    """)
    loaded_first, limit, loaded_all = result.stdout.split("\n")[:3]
    assert loaded_first == "[]", result.stdout
    assert limit == "500 cartpole kernelgym-envs", result.stdout
    assert loaded_all == "True", result.stdout
