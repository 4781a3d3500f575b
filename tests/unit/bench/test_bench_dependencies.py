"""The dependency-graph scenario (issue 30): items in layers, each waiting for the layer before;
turnplan with ``blockedBy`` takes one call per layer, starting each layer whole."""

from __future__ import annotations

from bench.measure import _instant_run
from bench.scenario import blockers_of, layers_of, titles_for
from bench.systems.dependency_graph import ReactDepsSystem, TurnplanDepsSystem


def test_the_graph_is_a_diamond_at_four_and_square_layers_above() -> None:
    assert layers_of(titles_for(4)) == [[0], [1, 2], [3]]
    assert blockers_of(titles_for(4)) == [[], [0], [0], [1, 2]]
    assert layers_of(titles_for(10)) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


async def test_turnplan_runs_every_layer_whole_and_react_one_layer_a_call() -> None:
    """The oracle notes any call whose rows in progress are not exactly the expected layer;
    a run with a problem (or an item done twice, or a row left open) is not ok."""
    for system in (TurnplanDepsSystem(), ReactDepsSystem()):
        _, problem = await _instant_run(system, 10)
        assert problem == "", (system.name, problem)
