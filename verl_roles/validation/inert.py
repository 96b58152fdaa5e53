"""Values the user set that verl would not read under the chosen settings (issue 27).

:mod:`verl_roles.upstream.inert_table` says when verl does not read a key, citing verl's lines per release
(the release data, :func:`verl_roles.base.releases.inert_sources`). Here the table's conditions are evaluated
on a resolved config, and the keys the user set (on the command line, in a file of their own, in a slime file)
that a holding row names are found. A value the user did not set stays quiet, whatever it is: a default is not
the user's doing.

Such a value is named, never refused (verl runs the config; it just does nothing with the value): one
warning per row (:class:`~verl_roles.base.notices.InertValueWarning`), a line of the run's summary, and a
sweep whose jobs differ only in such values is refused, since its jobs would train the same config.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from omegaconf import DictConfig

from verl_roles.base import releases
from verl_roles.base.layout import REF, engine
from verl_roles.base.releases import release_of
from verl_roles.upstream.inert_table import FACTS, ROWS, Clause, Fact, Known, Off, On, Row, Set
from verl_roles.validation.rules.values import (
    UNSET,
    critic_in_use,
    critic_off_reason,
    get,
    lora_on_policy,
    ref_engine_built,
    ref_in_use,
    ref_off_reason,
)


@dataclass(frozen=True)
class InertValue:
    """A key the user set that verl would not read: the row saying so, the setting that makes it inert
    (``algorithm.use_kl_in_reward=false``), and where the user set it."""

    key: str
    row: Row
    setting: str
    origin: str


def _fact(cfg: DictConfig, name: str) -> str | None:
    """The setting that makes the fact ``name`` (of :data:`FACTS`) true for ``cfg``, or None."""
    if name == "no reference policy":
        return None if ref_in_use(cfg) else ref_off_reason(cfg)
    if name == "reference in the actor":
        lora = lora_on_policy(cfg)
        return f"LoRA on the policy ({lora})" if ref_in_use(cfg) and lora else None
    if name == "reference static":
        if not ref_engine_built(cfg):
            return "no reference engine"
        dynamic = get(cfg, f"{REF}.log_prob_use_dynamic_bsz") is True
        return None if dynamic else f"{REF}.log_prob_use_dynamic_bsz=false"
    if name == "no critic":
        return None if critic_in_use(cfg) else critic_off_reason(cfg)
    if name == "critic trained":
        return "a critic is trained" if critic_in_use(cfg) else None
    if name == "v1 trainer":
        return "trainer.use_v1=true (verl's default trainer)" if get(cfg, "trainer.use_v1") is True else None
    if name in ("megatron", "fsdp"):
        chosen = engine(get(cfg, "model_engine"))
        family = "megatron" if chosen.mcore else "fsdp" if chosen.name == "dp" else chosen.name
        return f"model_engine={chosen.name}" if family == name else None
    if name == "no validation":
        before, freq = get(cfg, "trainer.val_before_train"), get(cfg, "trainer.test_freq")
        validates = before is not False or (isinstance(freq, int) and freq > 0)
        return None if validates else f"trainer.val_before_train=false and trainer.test_freq={freq}"
    raise KeyError(f"{name!r} is not a fact of verl_roles.upstream.inert_table.FACTS {FACTS}")


def _shown(value: object) -> str:
    if value is None or value is UNSET:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _clause(cfg: DictConfig, clause: Clause, release: str) -> str | None:
    """The setting that makes ``clause`` hold, or None when it does not."""
    if isinstance(clause, Fact):
        return _fact(cfg, clause.name)
    value = get(cfg, clause.key)
    if isinstance(clause, Off):
        return None if value is True else f"{clause.key}={_shown(value)}"
    if isinstance(clause, On):
        return f"{clause.key}=true" if value is True else None
    if isinstance(clause, Set):
        return None if value is None or value is UNSET else f"{clause.key}={_shown(value)}"
    if isinstance(clause, Known):
        known = releases.reference(release)["names"].get(clause.names) if clause.names else None
        unknown = known is not None and value not in known
        if not isinstance(value, str) or value in clause.readers or unknown:
            return None
        return f"{clause.key}={value}"
    raise TypeError(clause)


def _scoped(text: str, scope: str | None) -> str:
    return text if scope is None else text.replace("{s}", scope)


def _pattern(glob: str) -> re.Pattern[str]:
    """A key glob as a regex; ``{other}`` captures one key segment."""
    parts = glob.split("{other}")
    return re.compile("(?P<other>[^.]+)".join(fnmatch.translate(part)[4:-3] for part in parts) + r"\Z")


def _matches(row: Row, key: str, scope: str | None, cfg: DictConfig) -> bool:
    spared = any(fnmatch.fnmatchcase(key, _scoped(spare, scope)) for spare in row.spare)
    if spared:
        return False
    for glob in row.keys:
        found = _pattern(_scoped(glob, scope)).match(key)
        if found is None:
            continue
        if row.selector is None:
            return True
        chosen = get(cfg, _scoped(row.selector, scope))
        return found.group("other") != chosen
    return False


def inert_values(cfg: DictConfig, user_keys: Mapping[str, str]) -> list[InertValue]:
    """The keys of ``user_keys`` (key -> where the user set it) that verl would not read under ``cfg``'s
    settings, each with the first table row that says so (rows of the chosen release only)."""
    release = release_of(cfg)
    cited = releases.inert_sources(release)
    found: list[InertValue] = []
    claimed: set[str] = set()
    for row in ROWS:
        if row.id not in cited:
            continue
        for scope in row.scopes or (None,):
            settings = [_clause(cfg, _scoped_clause(clause, scope), release) for clause in row.when]
            if any(setting is None for setting in settings):
                continue
            for key, origin in user_keys.items():
                if key not in claimed and _matches(row, key, scope, cfg):
                    claimed.add(key)
                    setting = " and ".join(s for s in settings if s) or _selector_setting(row, scope, cfg)
                    found.append(InertValue(key, row, setting, origin))
    return found


def _scoped_clause(clause: Clause, scope: str | None) -> Clause:
    if scope is None or isinstance(clause, Fact):
        return clause
    return type(clause)(*(_scoped(v, scope) if isinstance(v, str) else v for v in vars(clause).values()))


def _selector_setting(row: Row, scope: str | None, cfg: DictConfig) -> str:
    if row.selector is None:
        return ""
    key = _scoped(row.selector, scope)
    return f"{key}={_shown(get(cfg, key))}"


def warnings_for(found: Iterable[InertValue], release: str) -> list[str]:
    """One message per row: the keys, where they were set, the setting that makes them inert, what verl
    does, its lines, and the fix."""
    by_row: dict[tuple[str, str], list[InertValue]] = {}
    for value in found:
        by_row.setdefault((value.row.id, value.setting), []).append(value)
    cited = releases.inert_sources(release)
    messages = []
    for (row_id, setting), values in by_row.items():
        row = values[0].row
        keys = ", ".join(f"{v.key} ({v.origin})" for v in values)
        lines = ", ".join(cited[row_id][:2])
        scope = _scope_of(row, values[0].key)
        here = f"here {setting}, and " if setting else ""
        messages.append(
            f"{keys} would do nothing: {here}{_scoped(row.reason, scope)} (verl {release}: "
            f"{lines}). Fix: {_scoped(row.fix, scope)}.")
    return messages


def summary_line(found: Iterable[InertValue]) -> str | None:
    """The summary's line naming every inert value the user set, with the setting that makes it inert."""
    by_setting: dict[str, list[str]] = {}
    for value in found:
        by_setting.setdefault(value.setting, []).append(value.key)
    if not by_setting:
        return None
    # A value verl never reads, whatever the settings, has no setting to name.
    return "; ".join(f"{', '.join(keys)}" + (f" (under {setting})" if setting else "")
                     for setting, keys in by_setting.items())


def _scope_of(row: Row, key: str) -> str | None:
    return next((scope for scope in row.scopes if key.startswith(f"{scope}.")), None)
