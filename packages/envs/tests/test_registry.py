"""The pluggy registry: entry points, conflicts, broken plugins, autoload switch."""

import dataclasses
import subprocess
import sys
import textwrap
import types

import pytest

import kernelgym.envs as kge
from kernelgym.envs import hookspecs, registry
from kernelgym.envs.classic import cartpole
from kernelgym.envs.hookspecs import hookimpl
from kernelgym.envs.spec import CPUReference

BUILTIN_IDS = {"CartPole-v1", "Pendulum-v1", "MountainCar-v0", "Acrobot-v1"}


class FakeEntryPoint:
    """What importlib.metadata gives the registry: a name, a value, a distribution, load()."""

    def __init__(self, name, plugin, distribution):
        self.name = name
        self.value = f"fake.{name}"
        self.dist = types.SimpleNamespace(name=distribution)
        self._plugin = plugin

    def load(self):
        if isinstance(self._plugin, BaseException):
            raise self._plugin
        return self._plugin


class Plugin:
    """A plugin object (pluggy needs it hashable) with the given hook function."""

    def __init__(self, hook):
        self.kernelgym_register_envs = hook


def _plugin(*specs):
    @hookimpl
    def kernelgym_register_envs():
        return list(specs)

    return Plugin(kernelgym_register_envs)


def _toy_spec(env_id):
    return dataclasses.replace(cartpole.SPEC, id=env_id)


@pytest.fixture
def fresh(monkeypatch):
    """A registry of its own whose plugin entry points the test chooses (and no declared ids)."""
    fake_entry_points = []
    monkeypatch.setattr(
        registry, "entry_points", lambda group: list(fake_entry_points) if group == hookspecs.ENTRY_POINT_GROUP else []
    )
    monkeypatch.delenv(registry.NO_AUTOLOAD_ENV_VAR, raising=False)
    return registry._Registry(), fake_entry_points


def test_builtins_register_through_entry_points():
    ids = set(kge.list_envs())
    assert BUILTIN_IDS <= ids
    spec = kge.get_spec("CartPole-v1")
    assert spec.distribution == "kernelgym-envs" and spec.plugin == "cartpole"
    assert kge.get_spec("kernelgym/CartPole-v1") is spec
    for env_id in ids:
        spec = kge.get_spec(env_id)
        assert isinstance(spec.load("reference"), CPUReference)
        spec.resolve()


def test_unknown_ids_and_bad_types():
    with pytest.raises(KeyError, match="CartPole-v1"):  # the message lists the known ids
        kge.get_spec("CartPole-v9")
    with pytest.raises(TypeError, match="env_id"):
        kge.get_spec(3)


def test_two_plugins_with_one_id_name_both_distributions(fresh):
    reg, eps = fresh
    eps += [
        FakeEntryPoint("first", _plugin(_toy_spec("Toy-v0")), "dist-alpha"),
        FakeEntryPoint("second", _plugin(_toy_spec("Toy-v0"), _toy_spec("Other-v0")), "dist-beta"),
    ]
    with pytest.warns(registry.PluginLoadWarning, match="dist-alpha") as caught:
        specs = reg.specs()
    message = " ".join(str(w.message) for w in caught)
    assert "dist-beta" in message and "Toy-v0" in message
    # neither claim is used; the other ids of the same plugins still are
    assert list(specs) == ["Other-v0"]
    assert reg.conflict("Toy-v0") == [("first", "dist-alpha"), ("second", "dist-beta")]


@pytest.mark.parametrize("failure", [ImportError("no module named nowhere"), SystemExit(3)])
def test_a_plugin_that_fails_to_import_is_reported_and_skipped(fresh, failure):
    reg, eps = fresh
    eps += [
        FakeEntryPoint("broken", failure, "dist-broken"),
        FakeEntryPoint("fine", _plugin(_toy_spec("Fine-v0")), "dist-fine"),
    ]
    with pytest.warns(registry.PluginLoadWarning, match="broken.*dist-broken.*failed to load") as caught:
        specs = reg.specs()
    assert list(specs) == ["Fine-v0"]
    assert specs["Fine-v0"].distribution == "dist-fine" and specs["Fine-v0"].plugin == "fine"
    cause = "sys.exit(3)" if isinstance(failure, SystemExit) else "no module named nowhere"
    assert cause in str(caught[0].message)


def test_a_hook_that_raises_or_returns_junk_is_reported_and_skipped(fresh):
    reg, eps = fresh

    @hookimpl
    def kernelgym_register_envs():
        raise RuntimeError("spec construction failed")

    eps += [
        FakeEntryPoint("raises", Plugin(kernelgym_register_envs), "d1"),
        FakeEntryPoint("junk", _plugin("not a spec"), "d2"),
        FakeEntryPoint("fine", _plugin(_toy_spec("Fine-v0")), "d3"),
    ]
    with pytest.warns(registry.PluginLoadWarning) as caught:
        specs = reg.specs()
    messages = " ".join(str(w.message) for w in caught)
    assert "raises" in messages and "junk" in messages
    assert list(specs) == ["Fine-v0"]


def test_autoload_switch_skips_third_party_entry_points(fresh, monkeypatch):
    reg, eps = fresh
    eps += [
        FakeEntryPoint("builtin", _plugin(_toy_spec("Builtin-v0")), "kernelgym-envs"),
        FakeEntryPoint("third", _plugin(_toy_spec("Third-v0")), "someone-else"),
    ]
    monkeypatch.setenv(registry.NO_AUTOLOAD_ENV_VAR, "1")
    assert list(reg.specs()) == ["Builtin-v0"]
    reg.register(_plugin(_toy_spec("Explicit-v0")), name="explicit")
    assert sorted(reg.specs()) == ["Builtin-v0", "Explicit-v0"]
    assert reg.specs()["Explicit-v0"].plugin == "explicit"


def test_a_keyboard_interrupt_in_a_plugin_is_the_users_and_propagates(fresh):
    reg, eps = fresh
    eps += [FakeEntryPoint("interrupted", KeyboardInterrupt(), "dist-x")]
    with pytest.raises(KeyboardInterrupt):
        reg.specs()


def test_register_plugin_by_name_of_a_module_that_exits_raises_import_error(tmp_path, monkeypatch):
    (tmp_path / "exits_at_import.py").write_text("import sys\nsys.exit(4)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match=r"exits_at_import.*sys.exit\(4\)"):
        registry._Registry().register("exits_at_import")


def test_register_plugin_refuses_objects_without_the_hook():
    with pytest.raises(TypeError, match="kernelgym_register_envs"):
        kge.register_plugin(object())


def test_register_plugin_adds_ids_to_make_and_gymnasium():
    import gymnasium

    kge.register_plugin(_plugin(_toy_spec("RegisteredToy-v0")), name="registered-toy")
    assert "RegisteredToy-v0" in kge.list_envs()
    assert kge.get_spec("RegisteredToy-v0").plugin == "registered-toy"
    assert "kernelgym/RegisteredToy-v0" in gymnasium.registry
    env = kge.make("RegisteredToy-v0", 2, backend="cpu", seed=0)
    assert env.reset()[0].shape == (2, 4)


def _run(code, **env):
    import os

    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_discovery_compiles_nothing():
    out = _run("""
        import sys
        import kernelgym.envs as kge
        ids = kge.list_envs()
        specs = [kge.get_spec(i) for i in ids]
        from kernelgym.envs.classic import cartpole
        assert not [m for m in sys.modules if m.startswith("kernelgym_launchers")], "a launcher was built"
        assert not cartpole._observe.signatures, "a device function was compiled"
        assert not cartpole.dynamics.signatures, "the physics was compiled"
        print(len(ids))
    """)
    assert int(out) >= 4


def test_environment_variable_disables_autoload_in_a_fresh_process():
    out = _run(
        """
        import warnings
        warnings.simplefilter("error")  # a skipped third-party plugin would warn
        import kernelgym.envs as kge
        print(sorted(kge.list_envs()))
    """,
        KERNELGYM_NO_PLUGIN_AUTOLOAD="1",
    )
    assert "CartPole-v1" in out


# ------------------------------------------------- one bad spec hides only itself
def _dict_observation_spec(env_id):
    """Builds an EnvSpec with a Dict observation space holding a MultiDiscrete (no leaf kind the
    runtime stores): EnvSpec refuses it, so this raises."""
    from gymnasium import spaces

    box = cartpole.SPEC.resolve().observation_space
    return dataclasses.replace(
        cartpole.SPEC, id=env_id, observation_space=spaces.Dict({"x": box, "m": spaces.MultiDiscrete([2, 3])})
    )


def test_each_spec_of_a_plugin_is_checked_on_its_own(fresh):
    reg, eps = fresh

    @hookimpl
    def yields_until_a_spec_fails():
        yield _toy_spec("Yielded-v0")
        yield _dict_observation_spec("DictObs-v0")

    eps += [
        FakeEntryPoint(
            "mixed",
            _plugin(_toy_spec("First-v0"), "not a spec", _toy_spec("Bad Id-v0"), _toy_spec("Last-v0")),
            "dist-mixed",
        ),
        FakeEntryPoint("generator", Plugin(yields_until_a_spec_fails), "dist-generator"),
    ]
    with pytest.warns(registry.PluginLoadWarning) as caught:
        specs = reg.specs()
    assert sorted(specs) == ["First-v0", "Last-v0", "Yielded-v0"]  # the good specs of both plugins stay
    messages = [str(w.message) for w in caught]
    assert len(messages) == 3, messages
    junk, bad_id, dict_obs = sorted(messages, key=lambda m: ("not a spec" not in m, "Bad Id" not in m))
    assert "'mixed'" in junk and "dist-mixed" in junk
    assert "'Bad Id-v0'" in bad_id and "dist-mixed" in bad_id and "Malformed environment ID" in bad_id
    for text in (
        "'generator'",
        "dist-generator",
        "'DictObs-v0'",
        "Yielded-v0",
        "['m']: expected a Box, Discrete, MultiBinary, Dict or Tuple",
        "flatten it into a Box (gymnasium.spaces.flatten_space)",
    ):
        assert text in dict_obs, (text, dict_obs)


def test_a_hook_that_builds_a_bad_spec_before_returning_is_skipped_naming_it_and_the_fix(fresh):
    reg, eps = fresh

    @hookimpl
    def builds_a_list():
        return [_toy_spec("Lost-v0"), _dict_observation_spec("DictObs-v0")]

    eps += [
        FakeEntryPoint("listed", Plugin(builds_a_list), "dist-listed"),
        FakeEntryPoint("fine", _plugin(_toy_spec("Fine-v0")), "dist-fine"),
    ]
    with pytest.warns(registry.PluginLoadWarning) as caught:
        specs = reg.specs()
    assert list(specs) == ["Fine-v0"]
    (message,) = [str(w.message) for w in caught]
    for text in ("'listed'", "dist-listed", "'DictObs-v0'", "flatten_space", "lost with it"):
        assert text in message, (text, message)


@pytest.mark.parametrize("junk", ["not a spec", _toy_spec("Bare-v0")])
def test_a_hook_that_returns_no_iterable_of_specs_is_one_warning(fresh, junk):
    reg, eps = fresh
    eps += [FakeEntryPoint("bare", Plugin(hookimpl(lambda: junk)), "dist-bare")]
    with pytest.warns(registry.PluginLoadWarning, match="bare.*dist-bare.*expected an iterable of EnvSpec") as caught:
        assert reg.specs() == {}
    assert len(caught) == 1


@pytest.mark.parametrize(
    ("env_id", "reason"),
    [("Bad Id-v0", "Malformed environment ID"), ("Toy-v01", "'kernelgym/Toy-v1'"), ("Toy-v0 ", None)],
)
def test_gymnasium_id_problem_says_why_gymnasium_cannot_hold_an_id(env_id, reason):
    problem = registry.gymnasium_id_problem(env_id)
    assert problem is not None and (reason is None or reason in problem)
    assert registry.gymnasium_id_problem("Toy-v0") is None and registry.gymnasium_id_problem("Toy") is None


# -------------------------------------------- ids that collide only in gymnasium
def test_ids_that_collide_in_gymnasium_are_all_left_out_naming_both_distributions(fresh, monkeypatch):
    reg, eps = fresh
    eps += [
        FakeEntryPoint("unversioned", _plugin(_toy_spec("Foo"), _toy_spec("Bar-v0")), "dist-a"),
        FakeEntryPoint("versioned", _plugin(_toy_spec("Foo-v0"), _toy_spec("Foo-v1")), "dist-b"),
    ]
    with pytest.warns(registry.PluginLoadWarning) as caught:
        specs = reg.specs()
    assert list(specs) == ["Bar-v0"]
    (message,) = [str(w.message) for w in caught]
    for text in ("'Foo'", "'Foo-v0'", "'Foo-v1'", "dist-a", "dist-b", "collide in gymnasium"):
        assert text in message, (text, message)
    assert reg.conflict("Foo") == [("unversioned", "dist-a"), ("versioned", "dist-b"), ("versioned", "dist-b")]
    assert reg.collisions("Foo-v0") == ["Foo", "Foo-v1"]
    monkeypatch.setattr(registry, "_REGISTRY", reg)
    with pytest.raises(KeyError, match=r"'Foo-v0' and \['Foo', 'Foo-v1'\] collide.*dist-a.*dist-b"):
        kge.get_spec("Foo-v0")


class FakeIdEntryPoint:
    """An entry point of the ``kernelgym.envs.ids`` group: its name is a declared id."""

    def __init__(self, name, distribution):
        self.name, self.value = name, "fake.module"
        self.dist = types.SimpleNamespace(name=distribution)


def test_malformed_and_colliding_declared_ids_are_left_out_naming_their_distributions(monkeypatch):
    declared = [
        FakeIdEntryPoint(env_id, distribution)
        for env_id, distribution in [
            ("Good-v0", "dist-x"),
            ("Bad Id-v0", "dist-x"),
            ("Foo", "dist-a"),
            ("Foo-v0", "dist-b"),
            ("Shared-v0", "dist-a"),
            ("Shared-v0", "dist-b"),
        ]
    ]
    monkeypatch.setattr(
        registry, "entry_points", lambda group: declared if group == hookspecs.ID_ENTRY_POINT_GROUP else []
    )
    monkeypatch.delenv(registry.NO_AUTOLOAD_ENV_VAR, raising=False)
    reg = registry._Registry()
    ids, problems = reg.checked_declarations()
    # an id two distributions declare is still one gymnasium id; the registry settles who provides it
    assert ids == {"Good-v0": ["dist-x"], "Shared-v0": ["dist-a", "dist-b"]}
    assert reg.declared_ids() == ["Good-v0", "Shared-v0"]
    malformed, collision = sorted(problems, key=lambda problem: "Malformed" not in problem)
    assert "'Bad Id-v0'" in malformed and "'dist-x'" in malformed
    for text in ("'Foo'", "'Foo-v0'", "'dist-a'", "'dist-b'", "collide in gymnasium"):
        assert text in collision, (text, collision)
