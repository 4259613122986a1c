"""Numba's live-variable analysis on bit sets (`kernelgym.core.live_map`): the same live map as
Numba's and numba-cuda's own, on random control-flow graphs and on real functions."""

import importlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba.core import analysis
from numba.core.compiler import run_frontend

import kernelgym.core.device_functions  # noqa: F401  (installs the bit-set analysis)
from kernelgym.core import live_map

VARIABLES = [f"v{index}" for index in range(12)]


@st.composite
def flow_graphs(draw):
    """A graph of up to 10 blocks entered at block 0 (back edges, self loops and blocks that
    nothing reaches included), and the variables each block uses and defines."""
    count = draw(st.integers(1, 10))
    edges = draw(st.sets(st.tuples(st.integers(0, count - 1), st.integers(0, count - 1)), max_size=3 * count))
    names = st.sets(st.sampled_from(VARIABLES), max_size=6)
    uses = {label: draw(names) for label in range(count)}
    defs = {label: draw(names) for label in range(count)}
    return count, sorted(edges), uses, defs


def _graph(controlflow, count, edges):
    graph = controlflow.CFGraph()
    for label in range(count):
        graph.add_node(label)
    for source, target in edges:
        graph.add_edge(source, target)
    graph.set_entry_point(0)
    graph.process()
    return graph


def _assert_numbas_live_map(controlflow, analysis: str, ours, flow) -> None:
    """``ours`` gives the live map of the function `install` replaced in module ``analysis``."""
    count, edges, uses, defs = flow
    graph = _graph(controlflow, count, edges)
    blocks = dict.fromkeys(range(count))
    theirs = live_map.replaced(analysis)
    assert theirs is not None and theirs is not ours
    assert ours(graph, blocks, uses, defs) == theirs(graph, blocks, uses, defs)


@settings(max_examples=300, deadline=None)
@given(flow_graphs())
def test_the_live_map_is_numbas_on_any_graph(flow):
    from numba.core import controlflow

    _assert_numbas_live_map(controlflow, "numba.core.analysis", live_map.compute_live_map, flow)


@settings(max_examples=300, deadline=None)
@given(flow_graphs())
def test_the_live_map_is_numba_cudas_on_any_graph(flow):
    controlflow = pytest.importorskip("numba.cuda.core.controlflow")
    importlib.import_module("numba.cuda.core.analysis")  # patched as it is imported
    _assert_numbas_live_map(controlflow, "numba.cuda.core.analysis", live_map.cuda_compute_live_map, flow)


def _nested(values, limit):
    total = 0.0
    for i in range(values.shape[0]):
        x = values[i]
        while x > limit:
            x = x / 2.0
            if x < 1.0:
                break
        else:
            x = -x
        total += x if i % 2 else -x
    return total


def test_numbas_modules_run_the_bit_set_analysis_and_get_numbas_live_map():
    from numba.core import ir_utils

    assert analysis.compute_live_map is live_map.compute_live_map
    assert ir_utils.compute_live_map is live_map.compute_live_map
    func_ir = run_frontend(_nested)
    cfg = analysis.compute_cfg_from_blocks(func_ir.blocks)
    usedefs = analysis.compute_use_defs(func_ir.blocks)
    ours = live_map.compute_live_map(cfg, func_ir.blocks, usedefs.usemap, usedefs.defmap)
    numbas = live_map.replaced("numba.core.analysis")(cfg, func_ir.blocks, usedefs.usemap, usedefs.defmap)
    assert ours == numbas and any(ours.values())
