"""The audit configuration: validated from CLI options or YAML, echoed into the report."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lmaudit.errors import InputError


class SignalConfig(BaseModel):
    """How the signal is computed (DESIGN.md: MLM energy; clm_loss: mean next-token NLL of a causal LM;
    classifier: the label probabilities of a sequence classifier, turned into Shejwalkar's features)."""

    model_config = ConfigDict(extra="forbid")
    signal: Literal["mlm_energy", "mlm_pll", "clm_loss", "classifier"] = "mlm_energy"
    k: int = Field(10, ge=1)
    masks: Literal["random", "all"] = "random"
    normalize: Literal["sum", "mean"] | None = None
    mask_fraction: float = Field(0.15, gt=0, le=1)
    seed: int = 0
    max_length: int | None = Field(None, ge=3)
    batch_tokens: int = Field(4096, ge=64)
    precision: Literal["fp32", "bf16", "auto"] = "fp32"


class EvaluationConfig(BaseModel):
    """How attacks are evaluated."""

    model_config = ConfigDict(extra="forbid")
    alphas: tuple[float, ...] = (0.1, 0.01, 0.001)
    threshold_alphas: tuple[float, ...] = (0.1, 0.01)
    bootstrap: int = Field(1000, ge=10)
    balanced_repeats: int = Field(10, ge=1)
    seed: int = 0
    delta: float = Field(1e-5, gt=0, lt=1, description="delta of the empirical epsilon lower bounds")


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
    signal: SignalConfig = SignalConfig()
    evaluation: EvaluationConfig = EvaluationConfig()
    whitebox: bool = Field(False, description="also run the white-box attacks (attention and gradient features of the target)")
    include_text: bool = False
    trust_remote_code: bool = False
    device: Literal["cpu", "cuda", "auto"] = "cpu"

    @model_validator(mode="after")
    def _roles_given_once(self) -> "AuditConfig":
        if self.data is None and (self.members is None or self.nonmembers is None):
            raise ValueError("give members and nonmembers files, or one data file with a role column")
        return self

    def role_files(self) -> dict[str | None, str]:
        """Files to load: role -> path (role None: the file's own role column decides)."""
        files = {
            "member": self.members, "nonmember": self.nonmembers,
            "population": self.population, "calibration_member": self.calibration_members,
            "shadow_member": self.shadow_members, "shadow_nonmember": self.shadow_nonmembers,
        }
        chosen: dict[str | None, str] = {role: path for role, path in files.items() if path}
        if self.data:
            chosen[None] = self.data
        return chosen


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
    for key in ("target", "reference", "shadow", "members", "nonmembers", "population", "calibration_members",
                "shadow_members", "shadow_nonmembers", "data", "out", "cache_dir"):
        if isinstance(values.get(key), str) and not Path(values[key]).is_absolute():
            values[key] = str(path.parent / values[key])
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return validated(values, str(path))
