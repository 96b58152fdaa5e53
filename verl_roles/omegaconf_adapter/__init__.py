"""The Hydra adapter, lower half: OmegaConf node internals, the one YAML dialect, Hydra's override text.

These helpers sit below the core (the steps, rules and tables read values through them) and import
nothing of verl_roles above the foundation tier. Together with :mod:`verl_roles.hydra_adapter` (the
upper half: composition) they are the only code of verl_roles that touches Hydra's or OmegaConf's
private API. Each private symbol used here, and the test that fails when a release changes it:

``override_text``
  - ``hydra.core.override_parser.types.Override._get_value_element_as_str``: a value written back as
    override text -- tests/test_legacy.py (``test_value_translation_applies_to_every_sweep_value``).
``yaml_dialect``
  - ``omegaconf._utils.get_yaml_loader`` (its implicit resolvers) and ``OmegaConfDumper.str_representer``
    -- tests/test_compose_cache.py (``test_fast_yaml_loader_*``), tests/test_output_yaml.py.
``nodes`` (OmegaConf node internals)
  - ``omegaconf._impl._resolve_container_value``: what ``OmegaConf.resolve`` does for one key of a
    container, run on the keys the plain-reference copy left; ``omegaconf._impl._resolve``: a
    referenced section resolved before it is copied -- tests/test_compose_cache.py (resolution
    equals OmegaConf's), tests/test_snapshots.py.
  - ``Node._get_node``, ``_is_interpolation``, ``_is_missing``, ``_is_none``, ``_value``, ``_set_value``,
    ``Container.__dict__["_content"]``, ``ValueNode._val`` -- tests/test_compose_cache.py (resolution
    equals OmegaConf's), tests/test_explain.py (raw values), tests/test_errors.py (did-you-mean key
    paths, mandatory values), tests/test_schema.py (the type check reads values through ``raw_items``),
    tests/test_bad_inputs.py (NaN at any key: ``scalar_leaves``).
``build`` (configs built node by node from plain data)
  - ``omegaconf._utils.get_value_kind`` (a string's interpolation checked as ``OmegaConf.create`` checks
    it), ``omegaconf.base.Metadata`` / ``ContainerMetadata``, and each node's ``__dict__`` entries
    ``_metadata``, ``_parent``, ``_flags_cache``, ``_content``, ``_val`` -- tests/test_plain_merge.py
    (``test_build_equals_omegaconf_create``), tests/test_compose_cache.py (``*_node_for_node``).
  - ``Container._get_full_key``: the key a resolution failed at, when OmegaConf's error names none (a
    resolver's list for a single value) -- tests/test_errors.py (``a-list-for-a-single-value``).

``tests/test_layers.py`` fails when any module outside the two adapter packages uses a private symbol,
and when a symbol used here is not listed above.
"""
