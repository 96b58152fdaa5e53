"""The Hydra adapter, upper half: composition through Hydra's own loader, and the main job as a Hydra app.

It sits above the core (it calls the gate and the steps on what it composes) and below the API and the
commands, which reach it only through :mod:`verl_roles.api`. Together with
:mod:`verl_roles.omegaconf_adapter` (the lower half, below the core) it is the only code of verl_roles
that touches Hydra's or OmegaConf's private API. Each private symbol used here, and the test that fails
when a Hydra release changes it (Hydra is pinned below 1.4, OmegaConf below 2.4):

``loader`` (composition, caches, defaults-list layers)
  - ``hydra._internal.config_loader_impl.ConfigLoaderImpl``: subclassed; overrides
    ``load_configuration``, ``load_sweep_config``, ``_load_configuration_impl``,
    ``_parse_overrides_and_create_caching_repo``, ``_compose_config_from_defaults_list``,
    ``_load_single_config`` (a release's layer over each shipped file); calls
    ``_process_config_searchpath``, ``compute_defaults_list`` and ``_load_single_config`` (explain's
    layers) -- tests/test_compose_cache.py (``test_cached_compose_and_fast_resolution_equal_stock_hydra``),
    tests/test_explain.py (``test_chain_is_exact_for_every_key``), tests/test_sweep.py,
    tests/test_verl_surface.py (every release's leaves).
  - ``hydra._internal.config_loader_impl.create_defaults_list``: the module global that
    ``_load_configuration_impl`` calls is replaced, for one call of our loader under a lock, by its
    memoized version (no subclass hook reaches it) -- tests/test_compose_cache.py.
  - the frame of ``ConfigLoaderImpl._apply_overrides_to_config`` (its locals ``override`` and ``cfg``) in
    the traceback of a bare ``ValueError`` / ``IndexError`` of OmegaConf, to name the override that went
    through a list -- tests/test_bad_inputs.py (``override/name-inside-a-list``).
  - ``hydra._internal.config_loader_impl.get_overrides_dirname``: the placeholder of a sweep job that
    does not compose -- tests/test_sweep.py (``test_an_invalid_job_fails_alone[does-not-compose]``).
  - ``hydra._internal.defaults_list._create_interpolation_map``: the module global Hydra's defaults tree
    calls for every config is replaced during the same call by a version that builds the map only
    for a defaults list holding an interpolated default (nothing else reads it) --
    tests/test_compose_cache.py (``test_an_interpolated_default_is_resolved``, ``*_node_for_node``).
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
``plain_compose`` (the task part of a defaults list merged as plain data)
  - ``ConfigLoaderImpl._compose_config_from_defaults_list`` called on the defaults that hold a ``hydra``
    node, with ``_load_single_config`` handing over that node alone for a file that also holds task
    keys; ``ConfigSource._normalize_file_name`` and the schema source's ``load_config`` (Hydra's
    schema matching, which declines the plain merge) -- tests/test_compose_cache.py
    (``test_plain_composition_equals_hydras_merge_node_for_node``, ``..._of_a_users_files_...``).
``app`` (the main job as a Hydra app)
  - ``hydra._internal.utils.get_args_parser`` and ``_run_hydra``: what ``@hydra.main``
    calls, on our argument list instead of ``sys.argv`` -- tests/test_main_cli.py
    (``test_hydra_flags_work``), tests/test_cmdline.py (``test_flag_table_is_hydras``).
  - ``hydra._internal.hydra.ConfigLoaderImpl``: the class ``Hydra.create_main_hydra2`` instantiates
    is replaced during one app run (Hydra offers no hook to choose the loader) -- tests/test_sweep.py
    (``test_an_invalid_job_fails_alone``: only our loader lets one job fail alone).
  - ``hydra.core.utils.JobReturn._return_value``: a job's return value without Hydra's re-raise --
    tests/test_sweep.py (``test_grid_writes_every_job_and_the_summary``).
``tests/test_layers.py`` fails when any module outside the two adapter packages uses a private symbol,
and when a symbol used here is not listed above.
"""
