"""Issue 25 fuzz of plugin loading: a stateful walk over a registry's plugins and lookups.

Plugins are registered one at a time (good ones, ones whose hook raises or calls sys.exit,
ones returning junk or ids gymnasium refuses) between lookups of good, hostile and
non-string ids. After every step `list_envs` and `get_spec` agree with a reference model:
an id one good plugin claims (and no id that gymnasium cannot hold beside it) is served by
that plugin; any other lookup raises a KeyError (TypeError for a non-string) naming
``env_id``, and, for an id left out by a conflict, every distribution that claimed it.
"""

import types
import warnings

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from test_registry import _toy_spec

from kernelgym.envs import registry
from kernelgym.envs.hookspecs import hookimpl

GOOD_IDS = ["A-v0", "A-v1", "A", "B-v0", "C-v0"]
BAD_IDS = ["Bad Id-v0", "Bad-v01"]  # EnvSpec takes them, gymnasium does not
LOOKUPS = GOOD_IDS + BAD_IDS + ["ns/X-v0", "kernelgym/A-v0", "kernelgym/B-v0", "", "a-v0", "Nope-v3", "A-v0 "]


def _name(env_id):
    name, _, _ = env_id.rpartition("-v")
    return (name, True) if name else (env_id, False)


class PluginWalk(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.saved = registry.entry_points, registry._REGISTRY
        registry.entry_points = lambda group: []
        registry._REGISTRY = registry._Registry()
        self.claims = {}  # env id -> distributions claiming it, in registration order
        self.count = 0

    def teardown(self):
        registry.entry_points, registry._REGISTRY = self.saved

    def _register(self, hook):
        self.count += 1
        module = types.ModuleType(f"plugin{self.count}")
        module.kernelgym_register_envs = hookimpl(hook)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", registry.PluginLoadWarning)
            registry._REGISTRY.register(module, name=module.__name__, distribution=f"dist-{self.count}")
        return f"dist-{self.count}"

    @rule(ids=st.lists(st.sampled_from(GOOD_IDS + BAD_IDS), max_size=3, unique=True))
    def add_plugin(self, ids):
        specs = [_toy_spec(env_id) for env_id in ids]
        distribution = self._register(lambda: specs)
        for env_id in ids:
            if env_id in GOOD_IDS:
                self.claims.setdefault(env_id, []).append(distribution)

    @rule(error=st.sampled_from([RuntimeError("broken"), SystemExit(3), ValueError("bad")]))
    def add_failing_plugin(self, error):
        def hook():
            raise error

        self._register(hook)

    @rule(junk=st.sampled_from([None, "A-v0", 42, ["not a spec"]]))
    def add_junk_plugin(self, junk):
        self._register(lambda: junk)

    def expected(self):
        """(served ids -> distribution, left-out ids -> distributions to name)."""
        groups = {}
        for env_id in self.claims:
            groups.setdefault(_name(env_id)[0], []).append(env_id)
        served, left_out = {}, {}
        for ids in groups.values():
            colliding = len({_name(env_id)[1] for env_id in ids}) == 2
            for env_id in ids:
                if colliding:
                    left_out[env_id] = [d for other in ids for d in self.claims[other]]
                elif len(self.claims[env_id]) > 1:
                    left_out[env_id] = self.claims[env_id]
                else:
                    served[env_id] = self.claims[env_id][0]
        return served, left_out

    @rule(env_id=st.sampled_from(LOOKUPS) | st.sampled_from([None, 3, b"A-v0", ("A-v0",)]))
    def lookup(self, env_id):
        served, left_out = self.expected()
        if not isinstance(env_id, str):
            with pytest.raises(TypeError, match="env_id"):
                registry.get_spec(env_id)
            return
        key = env_id.removeprefix("kernelgym/")
        if key in served:
            assert registry.get_spec(env_id).distribution == served[key]
            return
        with pytest.raises(KeyError) as raised:
            registry.get_spec(env_id)
        message = str(raised.value)
        assert "env_id" in message and repr(env_id) in message
        for distribution in left_out.get(key, []):
            assert repr(distribution) in message, (distribution, message)

    @invariant()
    def listed_ids_match_the_model(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", registry.PluginLoadWarning)
            assert registry.list_envs() == sorted(self.expected()[0])


PluginWalk.TestCase.settings = settings(max_examples=100, stateful_step_count=12, deadline=None)
test_plugin_walk = PluginWalk.TestCase
