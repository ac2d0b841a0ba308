"""The audit configuration: validated from CLI options or YAML, echoed into the report."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, NamedTuple

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from lmaudit.attacks.settings import AttackSettings
from lmaudit.data.columns import COLUMN_OPTIONS, ColumnNames
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
from lmaudit.models.source import QUANTIZATIONS, WEIGHT_DTYPES, ModelSource
from lmaudit.serving.settings import ServingSettings
from lmaudit.signals.registry import signal_names
from lmaudit.signals.sampling import ExtractionSettings
from lmaudit.signals.settings import DEVICES, SignalSettings

# The field (and command-line option, with - for _) that names each role's file.
ROLE_FILE_FIELDS = {
    MEMBER: "members", NONMEMBER: "nonmembers", POPULATION: "population", CALIBRATION_MEMBER: "calibration_members",
    SHADOW_MEMBER: "shadow_members", SHADOW_NONMEMBER: "shadow_nonmembers",
}
# What a non-member set may be called: it names a slice (nonmembers:NAME) and a command-line value (NAME=FILE).
NONMEMBER_SET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
# The signals an audit can be run on: a language model's loss or per-token values, or a classifier's label probabilities.
AUDITED_OUTPUTS = ("loss", "tokens", "log_probabilities")
# How the audited model is released, as its user declares it (never guessed): the report words its context line by it.
RELEASES = ("public-api", "internal", "open-weights")


def checked_nonmember_sets(value: str | dict[str, str] | None) -> str | dict[str, str] | None:
    """The non-members' file, or their sets by name; ValueError for no set or a name that cannot name one."""
    if isinstance(value, dict):
        if not value:
            raise ValueError("no non-member set; give at least one name: file")
        for name in value:
            if not NONMEMBER_SET_NAME.fullmatch(name):
                raise ValueError(f"'{name}' cannot name a non-member set; use letters, digits, '_', '.' and '-'")
    return value


def relative_to(folder: Path, value):
    """A path setting read from a file in `folder`: relative paths (alone, in a list, or the values of a mapping)
    made relative to the folder; anything else unchanged."""
    if isinstance(value, list):
        return [relative_to(folder, v) for v in value]
    if isinstance(value, dict):
        return {key: relative_to(folder, v) for key, v in value.items()}
    return str(folder / value) if isinstance(value, str) and not Path(value).is_absolute() else value


class RoleFile(NamedTuple):
    """A data file of an audit: the role of its samples (None: its role column decides), and the name of the
    non-member set it holds (None: its stem names its non-members' set)."""

    role: str | None
    path: str
    nonmember_set: str | None = None


class TokenPassSettings(BaseModel):
    """What the token-level attacks ask of the target besides its audited signal: a per-token signal beside it, the
    extra passes (lowercased texts, ReCaLL's prefix, neighbours, CAMIA, SaMIA, SPV-MIA, the reference KL) and DC-PDD's
    corpus."""

    model_config = ConfigDict(extra="forbid")
    token_signal: str | None = Field(None, description="a per-token signal of the target besides the audited one, for the "
                                                       "token-level attacks (e.g. mlm_tokens in an mlm_energy audit)")
    lowercase: bool = Field(True, description="token signals: also score the lowercased texts (one more target pass)")
    recall_prefix: int = Field(4, ge=0, description="token signals: population samples that make ReCaLL's non-member "
                                                    "prefix (one more target pass, longer inputs); 0 = no ReCaLL")
    neighbours: int = Field(0, ge=0, description="token signals: neighbour texts per sample (that many more target "
                                                 "passes); 0 = no neighbourhood attack")
    camia: bool = Field(False, description="causal LMs: CAMIA's pass of each text repeated 6 times (one more pass, six "
                                           "times as long)")
    samia: int = Field(0, ge=0, description="causal LMs: SaMIA's sampled continuations of each text's first half (that "
                                            "many generations per text; the paper: 10; 0 = off)")
    reference_kl: bool = Field(False, description="causal LMs: KL(p_reference || p_target) at every token, for "
                                                  "token-level InfoRMIA (one more pass, of the target and the first "
                                                  "reference together)")
    neighbour_words: int = Field(1, ge=1, description="words a language model replaces to make each neighbour")
    neighbour_model: str | None = Field(None, description="masked or causal LM that proposes the neighbours' words "
                                                          "(default: the first reference)")
    self_prompt_reference: str | None = Field(None, description="causal LMs: SPV-MIA's self-prompt reference, the base "
                                              "fine-tuned on the target's own generations (lmaudit train self-prompt); "
                                              "its losses of each text and of its neighbours (give --neighbours N)")
    frequency_data: str | None = Field(None, description="non-audited text (a corpus file) whose token frequencies DC-PDD "
                                                         "uses, besides the population's")

    @field_validator("token_signal")
    @classmethod
    def _token_signal(cls, name: str | None) -> str | None:
        choices = signal_names("tokens")
        if name is not None and name not in choices:
            raise ValueError(f"'{name}' is not a per-token signal; use one of {', '.join(choices)}")
        return name


class PlacementSettings(BaseModel):
    """How the audit's models are loaded and where their signals are computed: whether code shipped with a model may
    run, the device, the weights' dtype, device map and quantization, and the backend (this process or Ray)."""

    model_config = ConfigDict(extra="forbid")
    trust_remote_code: bool = False
    device: Literal[DEVICES] = "auto"
    dtype: Literal[WEIGHT_DTYPES] = Field("fp32", description="dtype the weights are loaded in (bf16 halves the memory "
                                          "of fp32; the signal store keeps each dtype's values apart)")
    device_map: Literal["auto"] | None = Field(None, description="auto: spread a model too large for one GPU over the "
                                               "GPUs and the CPU (accelerate)")
    quantization: Literal[QUANTIZATIONS] | None = Field(None, description="load the weights in 8 or 4 bits: "
                                                        "8bit, 4bit by bitsandbytes (CUDA only; the gpu extra), "
                                                        "rtn8, rtn4 rounded to nearest in process (any device)")
    backend: Literal["local", "ray"] = Field("local", description="where the signals are computed: local = in this "
                                             "process; ray = on the workers of a Ray cluster (the ray extra)")
    ray_address: str | None = Field(None, description="backend ray: the cluster to join ('auto': the one this machine "
                                    "belongs to; ray://HEAD:10001); default RAY_ADDRESS, else a new local cluster")
    ray_workers: int | None = Field(None, ge=1, description="backend ray: workers, each holding one copy of the models "
                                    "(default: one per GPU of the cluster with device cuda, else one per CPU)")


# The sections whose settings are also accepted flat, as they were before there were sections (and still are on the
# command line): a flat key named by a field of the section's model is moved into the section, and report.json's
# `config` echoes them flat again, so that a report written before the sections compares equal on a rerun.
FLAT_SECTIONS: dict[str, type[BaseModel]] = {"token_passes": TokenPassSettings, "placement": PlacementSettings,
                                              "serving": ServingSettings}


def nested(values: dict) -> dict:
    """`values` with each flat setting of a FLAT_SECTIONS section moved into that section; ValueError naming the
    setting when it is given both flat and in its section (which would win is a guess)."""
    values = dict(values)
    for name, model in FLAT_SECTIONS.items():
        flat = {key: values.pop(key) for key in list(values) if key in model.model_fields}
        section = values.get(name)
        if not flat or not isinstance(section, dict | BaseModel | None):
            values |= flat  # nothing to move, or a section that is no mapping: validation names what is wrong
            continue
        section = section.model_dump(exclude_unset=True) if isinstance(section, BaseModel) else dict(section or {})
        both = next((key for key in flat if key in section), None)
        if both is not None:
            raise ValueError(f"'{both}' is given both flat and as {name}.{both}; give it once")
        values[name] = section | flat
    return values


class AuditConfig(BaseModel):
    """An audit: which models, which data in which role, how to score and evaluate, where to write."""

    model_config = ConfigDict(extra="forbid")
    target: str
    adapter: str | None = Field(None, description="a PEFT (LoRA) adapter folder applied to the target (the base model)")
    reference: list[str] = Field(default_factory=list, description="reference models, never trained on the audited "
                                 "members (offline); the likelihood ratio uses their mean loss, RMIA and LiRA each one")
    reference_adapter: list[str] = Field(default_factory=list, description="PEFT adapters applied to the references, one "
                                         "per reference in the same order (none: the references as saved)")
    shadow: str | None = Field(None, description="shadow classifier, trained like the target on shadow_members")
    members: str | None = None
    nonmembers: str | dict[str, str] | None = Field(
        None, description="the non-members' file, or several sets of non-members by name (name: file); each result is "
                          "then also reported per set, and the main results audit the first set")
    population: str | None = None
    calibration_members: str | None = None
    shadow_members: str | None = None
    shadow_nonmembers: str | None = None
    data: str | None = Field(None, description="one file with a role column, instead of one file per role")
    columns: ColumnNames = Field(ColumnNames(), description="the data files' own names of the text, sample_id, "
                                 "group_id and label columns")
    out: str
    cache_dir: str | None = None
    signal: SignalSettings = SignalSettings()
    evaluation: EvaluationSettings = EvaluationSettings()
    whitebox: bool = Field(False, description="also run the white-box attacks (attention and gradient features of the target)")
    token_passes: TokenPassSettings = TokenPassSettings()
    attacks: AttackSettings = AttackSettings()
    include_text: bool = False
    fields: list[str] = Field(default_factory=list, description="sensitive fields as KIND=REGEX (the first group, else "
                              "the whole match): the localisation counts their tokens as a class of their own")
    figures: bool = Field(True, description="draw the report page's ROC curves and score histograms (a study's cells "
                                            "leave them to the study's page unless --cell-figures)")
    extraction: ExtractionSettings | None = Field(None, description="also run the extraction audit (causal LMs): greedy "
                                                  "and probabilistic extraction of each text's suffix from its prefix")
    release: Literal[RELEASES] | None = Field(None, description="how the model is released (public-api, internal, "
                                              "open-weights): the wording of the report's release context, never its "
                                              "numbers; none = not declared")
    allow_tokenizer_mismatch: bool = Field(False, description="audit with references whose tokenizer differs from the "
                                           "target's (masks are then drawn over each model's own tokens, not paired); "
                                           "the report and its verdict say so")
    placement: PlacementSettings = PlacementSettings()
    serving: ServingSettings = ServingSettings()

    @model_validator(mode="before")
    @classmethod
    def _flat_settings_into_their_sections(cls, values: Any) -> Any:
        return nested(values) if isinstance(values, dict) else values

    @model_serializer(mode="wrap")
    def _flat_sections(self, handler) -> dict[str, Any]:
        # the sections of FLAT_SECTIONS dumped flat, in their place: report.json's `config` as before the sections
        dumped = handler(self)
        return {key: value for name, entry in dumped.items() for key, value in (
            entry.items() if name in FLAT_SECTIONS and isinstance(entry, dict) else [(name, entry)])}

    @field_validator("signal")
    @classmethod
    def _audited_signal(cls, settings: SignalSettings) -> SignalSettings:
        choices = signal_names(*AUDITED_OUTPUTS)
        if settings.signal not in choices:
            raise ValueError(f"unknown signal '{settings.signal}' for an audit; use one of {', '.join(choices)}")
        return settings

    @field_validator("reference", "reference_adapter", mode="before")
    @classmethod
    def _as_list(cls, value):
        if value is None:
            return []
        return [value] if isinstance(value, str) else value

    @field_validator("fields")
    @classmethod
    def _field_rules(cls, values: list[str]) -> list[str]:
        from lmaudit.data.token_classes import field_rules

        try:
            field_rules(values)
        except InputError as error:  # its message names the option; the location is named once
            raise ValueError(str(error).removeprefix("--field ")) from None
        return values

    @field_validator("nonmembers")
    @classmethod
    def _nonmember_set_names(cls, value: str | dict[str, str] | None) -> str | dict[str, str] | None:
        return checked_nonmember_sets(value)

    @model_validator(mode="after")
    def _one_adapter_and_address_per_reference(self) -> AuditConfig:
        for name, given in (("adapter", self.reference_adapter), ("url", self.serving.reference_url)):
            if given and len(given) != len(self.reference):
                raise ValueError(f"{len(given)} reference {name}s for {len(self.reference)} references: give one "
                                 f"--reference-{name} per --reference, in the same order, or none")
        return self

    def target_source(self) -> ModelSource:
        """The target model: its folder, its adapter if any, and what serves it if not transformers here."""
        return ModelSource(self.target, self.adapter, self.serving.served_by(self.serving.target_url))

    def reference_sources(self) -> list[ModelSource]:
        """The reference models, each with its adapter and its address when they are given."""
        adapters = self.reference_adapter or [None] * len(self.reference)
        urls = self.serving.reference_url or [None] * len(self.reference)
        return [ModelSource(folder, adapter, self.serving.served_by(url))
                for folder, adapter, url in zip(self.reference, adapters, urls, strict=True)]

    def nonmember_sets(self) -> dict[str, str]:
        """Each non-member set's file by name, in the order given (one file: named by its stem)."""
        if isinstance(self.nonmembers, dict):
            return dict(self.nonmembers)
        return {Path(self.nonmembers).stem: self.nonmembers} if self.nonmembers else {}

    def role_files(self) -> list[RoleFile]:
        """Files to load, in the order of ROLE_FILE_FIELDS and then the data file (whose role column decides);
        InputError without the members and non-members (the Python API may give the samples as a DataFrame instead)."""
        if self.data is None and (self.members is None or self.nonmembers is None):
            raise InputError("give members and nonmembers files, or one data file with a role column")
        chosen = []
        for role, name in ROLE_FILE_FIELDS.items():
            if role == NONMEMBER:
                chosen += [RoleFile(role, path, set_name) for set_name, path in self.nonmember_sets().items()]
            elif getattr(self, name):
                chosen.append(RoleFile(role, getattr(self, name)))
        if self.data:
            chosen.append(RoleFile(None, self.data))
        refuse_a_file_in_two_roles(chosen)
        return chosen


def refuse_a_file_in_two_roles(files: list[RoleFile]) -> None:
    """InputError naming the file and both options where one file is given for two roles (its samples would then be
    refused one by one as duplicate sample ids, which hides the mistake)."""
    seen: dict[Path, RoleFile] = {}
    for role_file in files:
        path = Path(role_file.path).resolve()
        if path in seen:
            first, options = seen[path], [f"--{ROLE_FILE_FIELDS.get(f.role, 'data').replace('_', '-')}"
                                          for f in (seen[path], role_file)]
            raise InputError(f"{role_file.path}: given as both {options[0]} and {options[1]} (the same file for two "
                             f"roles{'' if first.role != role_file.role else ' or sets'}); give each its own file")
        seen[path] = role_file


COMMAND_LINE = "command line"  # how errors name where a setting came from when no file gave it
PATH_FIELDS = ("target", "adapter", "reference", "reference_adapter", "shadow", *ROLE_FILE_FIELDS.values(), "data", "out",
               "cache_dir")
SECTION_PATH_FIELDS = {"token_passes": ("neighbour_model", "self_prompt_reference", "frequency_data")}


def option_of(names: list[str]) -> str:
    """The command-line option(s) of a setting's location in the configuration: its field's name, dashed, but for the
    `columns` section, whose fields have options of their own, and `fields`, each given by one --field."""
    if names[0] == "columns":
        return COLUMN_OPTIONS.get(names[-1], " / ".join(COLUMN_OPTIONS.values()))
    return "--field" if names == ["fields"] else f"--{names[-1].replace('_', '-')}"


def validated(values: dict, source: str, model: type[BaseModel] | None = None) -> BaseModel:
    """`model` (default AuditConfig) made of `values`, or an InputError naming `source` and the first bad field."""
    try:
        return (model or AuditConfig)(**values)
    except ValidationError as err:
        first = err.errors()[0]
        names = [str(part) for part in first["loc"] if isinstance(part, str)]
        where = (f"{option_of(names)}: " if source == COMMAND_LINE and names else
                 f"{'.'.join(str(p) for p in first['loc'])}: " if first["loc"] else "")
        raise InputError(f"{source}: {where}{first['msg'].removeprefix('Value error, ')}") from None


def read_yaml_settings(path: Path, what: str = "config") -> dict:
    """The top-level mapping of a YAML settings file, or an InputError naming the file (`what`: how to call it)."""
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise InputError(f"{path}: no such {what} file") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(values, dict):
        raise InputError(f"{path}: expected a mapping of settings at the top level")
    return values


# The configuration's sections, each a settings model of its own: a flat setting (a command-line option) named by a
# field of a section's model belongs to that section.
SECTIONS: dict[str, type[BaseModel]] = {"signal": SignalSettings, "evaluation": EvaluationSettings, "attacks": AttackSettings,
                                        "columns": ColumnNames, **FLAT_SECTIONS}


def given(options: dict) -> dict:
    """The options that were given: neither None nor an empty repeatable option, so that a file's value or the default
    stands for the others."""
    return {key: value for key, value in options.items() if value is not None and value != ()}


def sectioned(options: dict) -> dict:
    """Flat settings (command-line options) nested as the configuration holds them: a given setting named by a field of
    a section's model goes into that section (seed into both signal and evaluation); the others stay at the top."""
    options = given(options)
    sections = {name: {key: value for key, value in options.items() if key in model.model_fields}
                for name, model in SECTIONS.items()}
    inside = {key for values in sections.values() for key in values}
    return {key: value for key, value in options.items() if key not in inside} | {
        name: values for name, values in sections.items() if values}


def file_settings(path: Path) -> dict:
    """An audit configuration file's settings, flat settings of a FLAT_SECTIONS section moved into it (so that an option
    given on top overrides them) and relative paths made relative to the file's folder; InputError naming the file."""
    try:
        values = nested(read_yaml_settings(path))
    except ValueError as err:
        raise InputError(f"{path}: {err}") from None
    for key in set(PATH_FIELDS) & set(values):
        values[key] = relative_to(path.parent, values[key])
    for name, keys in SECTION_PATH_FIELDS.items():
        if isinstance(values.get(name), dict):
            values[name] = {key: relative_to(path.parent, value) if key in keys else value
                            for key, value in values[name].items()}
    return values


def load_config(path: str | Path | None, options: dict | None = None) -> AuditConfig:
    """The audit configuration of a YAML file (relative paths in it relative to the file's folder) with `options` on
    top (flat, as `sectioned` takes them): a given option overrides the file's value, a section's options only their own
    fields. Without a file, the options alone."""
    values = {}
    if path is not None:
        path = Path(path)
        values = file_settings(path)
    for key, value in sectioned(options or {}).items():
        values[key] = {**values[key], **value} if key in SECTIONS and isinstance(values.get(key), dict) else value
    return validated(values, COMMAND_LINE if path is None else str(path))
