"""The audit configuration: validated from CLI options or YAML, echoed into the report."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from lmaudit.data.roles import (
    CALIBRATION_MEMBER,
    MEMBER,
    NONMEMBER,
    POPULATION,
    SHADOW_MEMBER,
    SHADOW_NONMEMBER,
)
from lmaudit.errors import InputError
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.signals.base import DEVICES, SignalSettings
from lmaudit.signals.registry import signal_names

# The field (and command-line option, with - for _) that names each role's file.
ROLE_FILE_FIELDS = {
    MEMBER: "members", NONMEMBER: "nonmembers", POPULATION: "population", CALIBRATION_MEMBER: "calibration_members",
    SHADOW_MEMBER: "shadow_members", SHADOW_NONMEMBER: "shadow_nonmembers",
}
# The signals an audit can be run on: a language model's loss, or a classifier's label probabilities.
AUDITED_OUTPUTS = ("loss", "log_probabilities")


class AuditConfig(BaseModel):
    """An audit: which models, which data in which role, how to score and evaluate, where to write."""

    model_config = ConfigDict(extra="forbid")
    target: str
    reference: str | None = None
    shadow: str | None = Field(None, description="shadow classifier, trained like the target on shadow_members")
    members: str | None = None
    nonmembers: str | None = None
    population: str | None = None
    calibration_members: str | None = None
    shadow_members: str | None = None
    shadow_nonmembers: str | None = None
    data: str | None = Field(None, description="one file with a role column, instead of one file per role")
    out: str
    cache_dir: str | None = None
    signal: SignalSettings = SignalSettings()
    evaluation: EvaluationSettings = EvaluationSettings()
    whitebox: bool = Field(False, description="also run the white-box attacks (attention and gradient features of the target)")
    include_text: bool = False
    trust_remote_code: bool = False
    device: Literal[DEVICES] = "cpu"

    @field_validator("signal")
    @classmethod
    def _audited_signal(cls, settings: SignalSettings) -> SignalSettings:
        choices = signal_names(*AUDITED_OUTPUTS)
        if settings.signal not in choices:
            raise ValueError(f"unknown signal '{settings.signal}' for an audit; use one of {', '.join(choices)}")
        return settings

    @model_validator(mode="after")
    def _roles_given_once(self) -> AuditConfig:
        if self.data is None and (self.members is None or self.nonmembers is None):
            raise ValueError("give members and nonmembers files, or one data file with a role column")
        return self

    def role_files(self) -> dict[str | None, str]:
        """Files to load: role -> path (role None: the file's own role column decides)."""
        chosen: dict[str | None, str] = {role: getattr(self, name) for role, name in ROLE_FILE_FIELDS.items()
                                         if getattr(self, name)}
        if self.data:
            chosen[None] = self.data
        return chosen


PATH_FIELDS = ("target", "reference", "shadow", *ROLE_FILE_FIELDS.values(), "data", "out", "cache_dir")


def validated(values: dict, source: str) -> AuditConfig:
    """An AuditConfig, or an InputError naming the first bad field."""
    try:
        return AuditConfig(**values)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "config"
        raise InputError(f"{source}: {where}: {first['msg']}") from None


def load_config(path: str | Path, overrides: dict | None = None) -> AuditConfig:
    """Read an audit YAML file; relative paths in it are relative to the file's folder."""
    path = Path(path)
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise InputError(f"{path}: no such config file") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(values, dict):
        raise InputError(f"{path}: expected a mapping of settings at the top level")
    for key in PATH_FIELDS:
        if isinstance(values.get(key), str) and not Path(values[key]).is_absolute():
            values[key] = str(path.parent / values[key])
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return validated(values, str(path))
