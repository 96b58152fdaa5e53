"""Config sources that read with the one YAML loader, and check a user's file before it is parsed.

Hydra reads every config file through a *config source* (one per search-path entry). Ours replace
Hydra's two file-backed ones:

- ``pkg://`` (Hydra's own configs, a plugin's): parsed with :func:`load_plain` (PyYAML's C parser in
  OmegaConf's dialect), each file once per version of it, shared by every set of sources;
- ``file://`` (the shipped ``conf/`` tree, a ``--config-dir``, every ``hydra.searchpath`` folder): a
  file of the shipped tree is parsed once per version of it, shared by every set of sources like a
  ``pkg://`` file (so a new ``--config-dir`` does not parse the shipped tree again); a file outside it
  is a user's file, whatever entry named it, read afresh for each set: its kind, size and encoding are
  checked before it is read (:mod:`verl_roles.base.limits`), its shape before it is merged
  (:mod:`verl_roles.inputs.containment`).

What a composition may contain once merged is the gate's question (:mod:`verl_roles.validation.gate`), asked
by the loader on the result. """

from __future__ import annotations

import copy
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from omegaconf import DictConfig

from verl_roles.base.errors import ConfigError, Problem
from verl_roles.base.limits import read_config_file
from verl_roles.compat.hydra import FileSourceBase, PackageSourceBase, header_of
from verl_roles.inputs import containment
from verl_roles.inputs.config_tree import CONF_DIR, unreadable_folder
from verl_roles.omegaconf_adapter.yaml_dialect import header_line, key_lines, load_plain, to_config

# The shipped files as parsed (Hydra's and plugins' pkg:// configs, and our conf/ tree however a search
# path names it), by (file, modification time, size), pickled: shared by every set of config sources
# (each new --config-dir is a set of its own, whose caches start empty), and each reader gets its own
# copy (a composition adopts the nodes it is given). A user's files are never kept here.
_PACKAGE_FILES: dict[tuple[str, int, int], tuple[bytes, dict[str, str | None], Any]] = {}


def _file_stamp(res: Any) -> tuple[str, int, int] | None:
    """(path, modification time, size) of a resource that is a file on disk, else None (a zip)."""
    if not isinstance(res, os.PathLike):
        return None
    try:
        info = os.stat(res)
    except OSError:
        return None
    return (os.fspath(res), info.st_mtime_ns, info.st_size)


class _Lookups:
    """Hydra's lookups of a name in a source, where a name the file system cannot hold (a part over 255
    bytes, say) is simply no group and no config, not an OSError; a group folder that cannot be listed
    is one paragraph naming it."""

    def list(self, config_path: str, results_filter: Any) -> list[str]:
        try:
            return list(super().list(config_path, results_filter))  # type: ignore[misc]
        except PermissionError as error:
            raise unreadable_folder(str(error.filename or config_path)) from None

    def is_group(self, config_path: str) -> bool:
        try:
            return bool(super().is_group(config_path))  # type: ignore[misc]
        except OSError:
            return False

    def is_config(self, config_path: str) -> bool:
        try:
            return bool(super().is_config(config_path))  # type: ignore[misc]
        except OSError:
            return False


class _PackageSource(_Lookups, PackageSourceBase):
    """``pkg://`` source parsing with :func:`load_plain`, each file once per version of it."""

    def read_resource(self, res: Any) -> ConfigResult:
        def parse() -> tuple[dict[str, str | None], Any]:
            text = res.read_bytes().decode("utf-8")
            return header_of(text[:512]), load_plain(text, str(res))

        return _parsed_result(self, str(res), _file_stamp(res), parse)


class _FileSource(_Lookups, FileSourceBase):
    """``file://`` source (the shipped tree, ``--config-dir``, ``hydra.searchpath``) parsing with
    :func:`load_plain`; every file outside the shipped tree is checked as a user's file."""

    @property
    def shipped(self) -> bool:
        return os.path.realpath(self.path) == str(CONF_DIR)

    def load_config(self, config_path: str) -> ConfigResult:
        full_path = os.path.realpath(os.path.join(self.path, self.file_name(config_path)))
        if not os.path.exists(full_path):
            folder = os.path.dirname(full_path)
            if os.path.isdir(folder) and not os.access(folder, os.R_OK | os.X_OK):
                raise unreadable_folder(folder)
            raise ConfigLoadError(f"Config not found : {full_path}")
        # A user's file: its kind, size and encoding are checked before it is parsed (verl_roles.base.limits),
        # and its shape before it is merged (verl_roles.inputs.containment). The shipped tree is ours.
        shipped = self.shipped

        def parse() -> tuple[dict[str, str | None], Any]:
            text = read_config_file(full_path, key=full_path)
            header = _header(text, full_path)
            data = load_plain(text, full_path)
            if not shipped:
                _check_user_file(config_path, full_path, text, header, data)
            return header, data

        return _parsed_result(self, full_path, _file_stamp(Path(full_path)) if shipped else None, parse)


def _parsed_result(source: Any, name: str, stamp: Any, parse: Callable[[], tuple[dict[str, str | None], Any]]
                   ) -> ConfigResult:
    """The result of reading one config file through ``source``: parsed once per process for a file of
    the shipped tree (``stamp`` names its version; None for a user's file, read afresh each time), a
    fresh config of its own for every caller."""
    parsed = _PACKAGE_FILES.get(stamp) if stamp is not None else None
    if parsed is not None:
        frozen, header, data = parsed
        config = thaw(frozen)
    else:
        header, data = parse()
        config = to_config(data, name)
        frozen = freeze(config) if stamp is not None else None
        if stamp is not None and isinstance(frozen, bytes):
            _PACKAGE_FILES[stamp] = (frozen, header, data)
    return with_plain(ConfigResult(
        config=config,
        path=f"{source.scheme()}://{source.path}",
        provider=source.provider,
        header=dict(header),
    ), data)


def _header(text: str, file: str) -> dict[str, str | None]:
    """Hydra's reading of a file's ``# @KEY VALUE`` header lines; a malformed one names the file."""
    try:
        return header_of(text[:512])
    except ValueError as error:
        raise ConfigError([Problem(
            key=f"{file}, line {header_line(text)}",
            message=f"has a malformed header line: {error}",
            fix="write the header as `# @package SECTION` (one word after @package)",
        )]) from None


def _check_user_file(config_path: str, file: str, text: str, header: dict, data: Any) -> None:
    """What a file of the user's may not do (:mod:`verl_roles.inputs.containment`): be an option of a group
    whose options are verl_roles' own, hold a ``defaults`` that is no list, or be a role option that reaches
    outside its role's section."""
    lines = key_lines(text)
    problem = containment.closed_group_problem(config_path, file) or containment.defaults_shape_problem(
        file, data, lines)
    if problem is not None:
        raise ConfigError([problem])
    problems = containment.defaults_entry_problems(file, data, lines)
    if problems:
        raise ConfigError(problems)
    # An option of a role group, also one in a sub-folder of it (`role/critic=sub/x`).
    group = next((g for g in containment.ROLE_OPTION_SECTIONS if config_path.startswith(f"{g}/")), None)
    if group is not None:
        problems = containment.role_option_problems(
            group, file, header.get("package"), data, key_lines(text), header_line(text)
        )
        if problems:
            raise ConfigError(problems)


# Hydra's source for each scheme -> ours. Keyed by scheme: Hydra's plugin discovery may load its
# source modules a second time, so its classes are not always the ones imported here.
FAST_SOURCES: dict[str, type[ConfigSource]] = {
    "pkg": _PackageSource,
    "file": _FileSource,
}


# --- caches ---------------------------------------------------------------------------------------


def is_ours(result: ConfigResult) -> bool:
    """A loaded config of verl_roles' own tree (conf/)."""
    scheme, _, rest = str(result.path).partition("://")
    return scheme == "file" and os.path.realpath(rest) == str(CONF_DIR)


def is_shipped(result: ConfigResult) -> bool:
    """A loaded config that verl_roles, Hydra or an installed Hydra plugin ships: from a ``pkg://`` or
    ``structured://`` source (packages and the config store, which no config can add to) or from our
    own tree; not from a user's folder."""
    scheme, _, rest = str(result.path).partition("://")
    return scheme != "file" or os.path.realpath(rest) == str(CONF_DIR)


# The attribute of a loaded result holding the file's data as read (plain dicts, lists and scalars;
# without the top-level ``defaults``, which Hydra takes out of the config too). Shared: never changed.
_PLAIN = "verl_roles_plain"


def with_plain(result: ConfigResult, data: Any) -> ConfigResult:
    """``result`` carrying the data its config was made from (for the plain composition)."""
    if isinstance(data, dict) and "defaults" in data:
        data = {key: value for key, value in data.items() if key != "defaults"}
    setattr(result, _PLAIN, {} if data is None else data)
    return result


def plain_of(result: ConfigResult) -> Any:
    """The data a loaded result was made from (see :func:`with_plain`), or None (a structured config)."""
    return getattr(result, _PLAIN, None)


def freeze(cfg: DictConfig) -> bytes | DictConfig:
    """What a memo stores: the pickled config (unpickling is ~5x faster than a deep copy), or a deep copy
    when something in it cannot be pickled."""
    try:
        return pickle.dumps(cfg, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return copy.deepcopy(cfg)


def thaw(template: bytes | DictConfig) -> DictConfig:
    """A private copy of a stored config."""
    if isinstance(template, bytes):
        return pickle.loads(template)  # noqa: S301 - bytes we pickled ourselves in this process
    return copy.deepcopy(template)
