"""What a model folder's config.json says: the model's family, whether it has attention, how two architectures
differ, a classifier's labels."""

from __future__ import annotations

import json
from pathlib import Path

from lmaudit.errors import InputError
from lmaudit.models.folders import check_model_folder, resolve_model_folder
from lmaudit.models.source import ModelSource, as_source
from lmaudit.models.training_file import read_training_summary

FAMILY_SUFFIXES = ((("ForMaskedLM",), "mlm"), (("ForCausalLM", "LMHeadModel"), "clm"), (("ForSequenceClassification",), "classifier"))


def family_of(class_names: list[str]) -> str | None:
    """'mlm', 'clm' or 'classifier' for a model of these classes (config.json's architectures, or type(model).__name__)."""
    for suffixes, family in FAMILY_SUFFIXES:
        if any(name.endswith(suffixes) for name in class_names):
            return family
    return None


def model_family(model: str | Path | ModelSource) -> str:
    """'mlm', 'clm' or 'classifier', from the architecture saved in config.json."""
    folder = resolve_model_folder(as_source(model).folder)
    check_model_folder(folder)
    architectures = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("architectures") or []
    family = family_of(architectures)
    if family is None:
        raise InputError(f"{folder}/config.json: architecture {', '.join(architectures) or 'unknown'} is not a masked LM, "
                         "causal LM or sequence classifier; white-box features need one of those")
    return family


def has_attention(model: str | Path | ModelSource) -> bool:
    """Whether the model has attention heads (transformers do; lmaudit's LSTM classifier does not), from config.json."""
    config = json.loads((resolve_model_folder(as_source(model).folder) / "config.json").read_text(encoding="utf-8"))
    return any(key in config for key in ("num_attention_heads", "n_head", "n_heads"))


ARCHITECTURE_KEYS = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads")


def architecture_difference(first: str | Path | ModelSource, second: str | Path | ModelSource) -> str | None:
    """How two models' architectures differ (model type, width, depth, heads), from config.json read by transformers
    (whose attribute maps give every family these names: GPT-2's n_embd is its hidden_size); None if they don't."""
    from transformers import AutoConfig

    configs = []
    for model in (first, second):
        folder = resolve_model_folder(as_source(model).folder)
        try:
            configs.append(AutoConfig.from_pretrained(folder))
        except (OSError, ValueError) as error:
            raise InputError(f"{folder}/config.json: unreadable model config ({error}); give a saved model's "
                             "folder") from None
    differences = [f"{key} {getattr(configs[0], key, None)} vs {getattr(configs[1], key, None)}"
                   for key in ARCHITECTURE_KEYS if getattr(configs[0], key, None) != getattr(configs[1], key, None)]
    return ", ".join(differences) or None


def classifier_labels(model: str | Path | ModelSource) -> list[str]:
    """A classifier's label names in output order: from its config.json (id2label), or, for a classifier adapter trained
    by lmaudit on a base model without a classification head, from the adapter's training summary."""
    source = as_source(model)
    if source.adapter is not None:
        trained = read_training_summary(source.adapter)
        if trained is not None and trained.labels:
            return list(trained.labels)
    folder = resolve_model_folder(source.folder)
    check_model_folder(folder)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InputError(f"{folder}/config.json: unreadable model config ({err})") from None
    architectures = config.get("architectures") or []
    if architectures and not any(a.endswith("ForSequenceClassification") for a in architectures):
        raise InputError(f"{folder}: saved as {', '.join(architectures)}, not a sequence classifier; "
                         "audit a language model with --signal mlm_energy or clm_loss")
    id2label = config.get("id2label")
    if not isinstance(id2label, dict) or not id2label:
        raise InputError(f"{folder}/config.json: no id2label; this is not a sequence classifier")
    return [str(id2label[key]) for key in sorted(id2label, key=int)]
