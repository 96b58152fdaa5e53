"""The plain merge and build of a composition's task part give what OmegaConf's merge and create give,
node for node, or decline (NotPlain) and leave it to OmegaConf. Generated configs cover the merge rules:
a key added or merged, ``???`` that overrides nothing, None or a scalar replacing a mapping or a list, a
list replacing a list, interpolations (plain references, relative ones, string interpolation, resolvers)
as the value merged over."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from node_fingerprint import fingerprint
from omegaconf import OmegaConf, flag_override

from verl_roles.omegaconf_adapter.build import NotPlainData, build
from verl_roles.omegaconf_adapter.plain_merge import NotPlain, merge

# What Hydra/OmegaConf do decides these tests' outcome: CI runs them on both stacks.
pytestmark = pytest.mark.stack

KEYS = st.sampled_from(["a", "b", "c"])
SCALARS = st.sampled_from([
    1, 2.5, None, True, "x", "???", "${a}", "${b.c}", "${.a}", "${..b}", "p${a}q", "${a.b.c}", "${c}",
    "${oc.env:HOME}", "${now:%H}", "\\${a}", "${a.0}",
])
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)
FILES = st.lists(st.dictionaries(KEYS, VALUES, min_size=1, max_size=3), min_size=1, max_size=4)


def omegaconf_merge(files: list[dict]) -> object:
    """Hydra's composition loop: one empty root, each file merged in turn, nodes adopted."""
    root = OmegaConf.create()
    with flag_override(root, "no_deepcopy_set_nodes", True):
        for data in files:
            root.merge_with(OmegaConf.create(data))
    OmegaConf.clear_cache(root)
    return root


def test_plain_merge_equals_omegaconfs_merge():
    counts = {"compared": 0, "declined": 0}

    @settings(max_examples=400, deadline=None)
    @given(FILES)
    def property_(files):
        before = copy.deepcopy(files)
        merged: dict = {}
        try:
            for data in files:
                merge(merged, data, merged)
        except NotPlain:
            counts["declined"] += 1
            return
        finally:
            assert files == before  # the inputs are never changed
        counts["compared"] += 1
        assert fingerprint(build(merged)) == fingerprint(omegaconf_merge(files))

    property_()
    # The property is about the merges it models: most drawn files are compared, not declined.
    assert counts["compared"] >= counts["declined"], counts


@pytest.mark.parametrize("files", [
    [{"a": {"b": 1}}, {"a": None}],  # None replaces a mapping
    [{"a": [1, 2]}, {"a": "???"}],  # ??? overrides nothing
    [{"a": 1, "b": {"x": 1}}, {"a": "${b.y}"}, {"a": 2}],  # a reference to nothing, merged over
    [{"a": {"x": 1}, "c": "${a.x}"}, {"c": 5}],  # a reference to a value, merged over
    [{"c": {"d": "${..a}"}, "a": 1}, {"c": {"d": 2}}],  # a relative reference
])
def test_merge_rules_are_modelled_and_equal(files):
    merged: dict = {}
    for data in files:
        merge(merged, data, merged)
    assert fingerprint(build(merged)) == fingerprint(omegaconf_merge(files))


@pytest.mark.parametrize("files", [
    [{"a": {"x": 1}, "c": "${a}"}, {"c": {"y": 2}}],  # OmegaConf moves the referenced node itself
    [{"a": [1]}, {"a": {"x": 1}}],  # OmegaConf refuses
    [{"a": "${oc.env:HOME}"}, {"a": 1}],  # a resolver runs during the merge
])
def test_merges_plain_data_does_not_model_are_declined(files):
    with pytest.raises(NotPlain):
        merged: dict = {}
        for data in files:
            merge(merged, data, merged)


@pytest.mark.parametrize("data", [
    {"a": [1, {"b": None, "c": [[]]}], "x": "${a}", "y": "???", "z": 1.5, "t": True, "e": {}, "s": ""},
    {"key.with.dots": 1, "${x}": 2, "": 3},
])
def test_build_equals_omegaconf_create(data):
    assert fingerprint(build(data)) == fingerprint(OmegaConf.create(data))


@pytest.mark.parametrize("data", [{1: "int key"}, {"a": b"bytes"}, {"a": [1, {"b": 1j}]}])
def test_build_declines_what_omegaconf_would_convert_or_refuse(data):
    with pytest.raises(NotPlainData):
        build(data)


def test_build_checks_interpolations_as_omegaconf_create_does():
    with pytest.raises(Exception) as ours:
        build({"a": "${unclosed"})
    with pytest.raises(Exception) as theirs:
        OmegaConf.create({"a": "${unclosed"})
    assert type(ours.value) is type(theirs.value)
