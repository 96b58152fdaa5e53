"""The one Hydra adapter: the only code of verl_roles that touches Hydra's or OmegaConf's private API.

Everything above it (the pipeline steps, the rules, the commands) uses Hydra and OmegaConf through
their public API and this package. Each private symbol used, and the test that fails when a Hydra or
OmegaConf release changes it (Hydra is pinned below 1.4, OmegaConf below 2.4):

``loader`` (composition, caches, defaults-list layers)
  - ``hydra._internal.config_loader_impl.ConfigLoaderImpl``: subclassed; overrides
    ``load_configuration``, ``load_sweep_config``, ``_load_configuration_impl``,
    ``_parse_overrides_and_create_caching_repo``, ``_compose_config_from_defaults_list``; calls
    ``_process_config_searchpath``, ``compute_defaults_list`` and ``_load_single_config`` (explain's
    layers) -- tests/test_compose_cache.py (``test_cached_compose_and_fast_resolution_equal_stock_hydra``),
    tests/test_explain.py (``test_chain_is_exact_for_every_key``), tests/test_sweep.py.
  - ``hydra._internal.config_loader_impl.create_defaults_list``: the module global that
    ``_load_configuration_impl`` calls is replaced, for one call of our loader under a lock, by its
    memoized version (no subclass hook reaches it) -- tests/test_compose_cache.py.
  - the frame of ``ConfigLoaderImpl._apply_overrides_to_config`` (its locals ``override`` and ``cfg``) in
    the traceback of a bare ``ValueError`` / ``IndexError`` of OmegaConf, to name the override that went
    through a list -- tests/test_bad_inputs.py (``override/name-inside-a-list``).
  - ``hydra._internal.config_loader_impl.get_overrides_dirname``: the placeholder of a sweep job that
    does not compose -- tests/test_sweep.py (``test_an_invalid_job_fails_alone[does-not-compose]``).
  - ``hydra._internal.defaults_list.DefaultsList``: a memoized list with this call's value overrides
    -- tests/test_compose_cache.py.
  - ``hydra._internal.config_repository.ConfigRepository`` / ``CachingConfigRepository``: subclassed
    (file cache, per-call repository) -- tests/test_compose_cache.py
    (``test_a_changed_config_file_is_read_again``).
  - ``hydra._internal.core_plugins.file_config_source.FileConfigSource``,
    ``...importlib_resources_config_source.ImportlibResourcesConfigSource``: subclassed to read with
    our YAML loader; ``FileConfigSource._normalize_file_name``, ``ImportlibResourcesConfigSource
    ._read_config`` and ``hydra.plugins.config_source.ConfigSource._get_header_dict`` --
    tests/test_compose_cache.py, tests/test_roles.py (``test_user_role_option_from_config_dir``).
  - ``hydra._internal.utils.create_config_search_path`` -- every composing test.
``app`` (the main job as a Hydra app)
  - ``hydra._internal.utils.get_args_parser`` and ``_run_hydra``: what ``@hydra.main``
    calls, on our argument list instead of ``sys.argv`` -- tests/test_main_cli.py
    (``test_hydra_flags_work``), tests/test_cmdline.py (``test_flag_table_is_hydras``).
  - ``hydra._internal.hydra.ConfigLoaderImpl``: the class ``Hydra.create_main_hydra2`` instantiates
    is replaced during one app run (Hydra offers no hook to choose the loader) -- tests/test_sweep.py
    (``test_an_invalid_job_fails_alone``: only our loader lets one job fail alone).
  - ``hydra.core.utils.JobReturn._return_value``: a job's return value without Hydra's re-raise --
    tests/test_sweep.py (``test_grid_writes_every_job_and_the_summary``).
``overrides``
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

``tests/test_layers.py`` fails when any module outside this package uses one of these.
"""
