"""The data card's plots are cached by the facts each one reads (``labeling.plots``): a cached plot is the plot
matplotlib draws, any change of what it reads draws it again, and each drawer reads only what its key holds."""

import copy

import pytest
from matplotlib.figure import Figure

from labeling import plots
from tests.labeling.test_release_card import _study_world, make_facts, study  # noqa: F401  (fixtures)


@pytest.fixture
def facts(study):  # noqa: F811
    plots.card_plots_cache_clear()
    yield make_facts(study["project"])
    plots.card_plots_cache_clear()


def test_a_cached_plot_is_the_drawn_plot(facts):
    drawn = plots.card_plots(facts)
    assert len(plots._CARD_PLOT_CACHE) == len(plots._CARD_PLOTTERS)
    assert plots.card_plots(copy.deepcopy(facts)) == drawn  # from the cache
    plots.card_plots_cache_clear()
    assert plots.card_plots(facts) == drawn  # drawn again


@pytest.mark.parametrize("name", ["scale", "agreement", "final_labels"])
def test_a_change_of_what_a_plot_reads_draws_it_again(facts, name):
    before = plots.card_plots(facts)
    changed = copy.deepcopy(facts)
    if name == "scale":
        changed["scale"]["name"] += " (renamed)"
    elif name == "agreement":
        phase = next(p for p in changed["agreement"]["phases"] if "alpha" in p)
        phase["name"] = "Renamed phase"
    else:
        changed["final_labels"]["tones"][0]["share"]["k"] += 1
    after = plots.card_plots(changed)
    for plot in before:
        assert (after[plot] != before[plot]) == (plot == f"plots/{name}.png"), plot


@pytest.mark.parametrize("name", ["scale", "agreement", "final_labels"])
def test_each_drawer_reads_only_the_facts_of_its_key(facts, name):
    """A drawer that read another section would be served stale from the cache: draw each one with its own
    section alone (a KeyError here means the cache key must name more)."""
    draw, size, reads = plots._CARD_PLOTTERS[name]
    only = {reads: copy.deepcopy(facts[reads])}
    draw(Figure(figsize=size(only)), only)
