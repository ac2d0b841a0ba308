"""Load models (masked LM, causal LM, classifier) from a local folder or the local Hugging Face cache, safetensors only,
offline; fingerprint them; read what their config says."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from lmaudit.errors import InputError
from lmaudit.models import quiet_transformers

FINGERPRINT_FILES = (
    "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "vocab.txt", "vocab.json", "merges.txt",
)


@dataclass
class LoadedModel:
    """A model in eval mode with its tokenizer."""

    model: object
    tokenizer: object


def model_fingerprint(path: str | Path) -> str:
    """SHA-256 over the weights, config and tokenizer files of a model folder (hex)."""
    folder = Path(path)
    names = sorted(p.name for p in folder.iterdir() if p.suffix == ".safetensors" or p.name in FINGERPRINT_FILES)
    return _files_digest(folder, _stat_key(folder, names))


def tokenizer_fingerprint(path: str | Path) -> str:
    """SHA-256 over a model folder's tokenizer files: equal for two models that tokenize alike."""
    folder = Path(path)
    names = sorted(p.name for p in folder.iterdir() if p.name in FINGERPRINT_FILES and p.name != "config.json")
    return _files_digest(folder, _stat_key(folder, names))


def _stat_key(folder: Path, names: list[str]) -> tuple:
    return tuple((name, (folder / name).stat().st_size, (folder / name).stat().st_mtime_ns) for name in names)


@functools.lru_cache(maxsize=64)
def _files_digest(folder: Path, files: tuple) -> str:
    """Hash of the named files; cached on (name, size, mtime) so a large model is read once per process."""
    digest = hashlib.sha256()
    for name, _, _ in files:
        digest.update(name.encode())
        with open(folder / name, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def resolve_model_folder(name: str | Path) -> Path:
    """A local model folder, or the local Hugging Face cache's copy of hub id `name` (never downloaded)."""
    folder = Path(name)
    if folder.is_dir() or folder.is_absolute() or str(name).startswith("."):
        return folder
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(str(name), local_files_only=True))
    except Exception:  # not a valid id, or not in the cache: both mean the same thing to the user
        raise InputError(
            f"{name}: no such model folder, and no model of that id in the local Hugging Face cache "
            "(lmaudit never downloads); pass a folder written by save_pretrained"
        ) from None


def resolve_device(device: str) -> str:
    """'auto' -> cuda when available, else cpu; 'cuda' without a GPU is a user error."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: no CUDA GPU is visible to torch here; use --device cpu or auto")
    return device


def check_model_folder(path: Path) -> None:
    """Refuse a model folder that is missing, has no config or has no safetensors weights."""
    if not path.is_dir():
        raise InputError(f"{path}: no such model folder; pass a folder written by save_pretrained or `lmaudit train`")
    if not (path / "config.json").is_file():
        raise InputError(f"{path}: no config.json; pass a folder written by save_pretrained")
    if not any(path.glob("*.safetensors")):
        raise InputError(
            f"{path}: no .safetensors weights (lmaudit does not load pickled .bin weights); "
            "re-save the model with save_pretrained(..., safe_serialization=True)"
        )


def load_masked_lm(path: str | Path, device: str = "cpu", trust_remote_code: bool = False) -> LoadedModel:
    """Load a masked LM and its tokenizer for scoring (eval mode), or raise InputError saying why not."""
    from transformers import AutoModelForMaskedLM

    loaded = _load(path, AutoModelForMaskedLM, "masked language model",
                   "pass a BERT-, RoBERTa- or DistilBERT-style masked LM", device, trust_remote_code)
    if loaded.tokenizer.mask_token_id is None:
        raise InputError(f"{path}: the tokenizer has no mask token, so this is not a masked LM")
    return loaded


def load_causal_lm(path: str | Path, device: str = "cpu", trust_remote_code: bool = False) -> LoadedModel:
    """Load a causal (GPT-style) LM and its tokenizer for scoring, or raise InputError saying why not."""
    from transformers import AutoModelForCausalLM

    loaded = _load(path, AutoModelForCausalLM, "causal language model", "pass a GPT-2-style causal LM or use an MLM signal",
                   device, trust_remote_code)
    # transformers would load a BERT masked LM as BertLMHeadModel and score it left to right: meaningless numbers.
    architectures = loaded.model.config.architectures or []
    if architectures and not any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in architectures):
        raise InputError(f"{path}: saved as {', '.join(architectures)}, not a causal LM; use --signal mlm_energy or mlm_pll")
    return loaded


FAMILY_SUFFIXES = ((("ForMaskedLM",), "mlm"), (("ForCausalLM", "LMHeadModel"), "clm"), (("ForSequenceClassification",), "classifier"))


def family_of(class_names: list[str]) -> str | None:
    """'mlm', 'clm' or 'classifier' for a model of these classes (config.json's architectures, or type(model).__name__)."""
    for suffixes, family in FAMILY_SUFFIXES:
        if any(name.endswith(suffixes) for name in class_names):
            return family
    return None


def model_family(path: str | Path) -> str:
    """'mlm', 'clm' or 'classifier', from the architecture saved in config.json."""
    import json

    folder = resolve_model_folder(path)
    check_model_folder(folder)
    architectures = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("architectures") or []
    family = family_of(architectures)
    if family is None:
        raise InputError(f"{folder}/config.json: architecture {', '.join(architectures) or 'unknown'} is not a masked LM, "
                         "causal LM or sequence classifier; white-box features need one of those")
    return family


def has_attention(path: str | Path) -> bool:
    """Whether the model has attention heads (transformers do; lmaudit's LSTM classifier does not), from config.json."""
    import json

    config = json.loads((resolve_model_folder(path) / "config.json").read_text(encoding="utf-8"))
    return any(key in config for key in ("num_attention_heads", "n_head", "n_heads"))


ARCHITECTURE_KEYS = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_layers")


def architecture_difference(first: str | Path, second: str | Path) -> str | None:
    """How two models' architectures differ (model type, width, depth, heads), from config.json; None if they don't."""
    import json

    configs = [json.loads((resolve_model_folder(p) / "config.json").read_text(encoding="utf-8")) for p in (first, second)]
    differences = [f"{key} {configs[0].get(key)} vs {configs[1].get(key)}" for key in ARCHITECTURE_KEYS
                   if configs[0].get(key) != configs[1].get(key)]
    return ", ".join(differences) or None


def classifier_labels(path: str | Path) -> list[str]:
    """A classifier's label names in output order, from its config.json (id2label)."""
    import json

    folder = resolve_model_folder(path)
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


def load_classifier(path: str | Path, device: str = "cpu", trust_remote_code: bool = False) -> LoadedModel:
    """Load a sequence classifier (BERT-style or lmaudit's LSTM) and its tokenizer, or raise InputError saying why not."""
    from transformers import AutoModelForSequenceClassification

    import lmaudit.models.classifier  # noqa: F401  (registers the LSTM classifier with the Auto classes)

    classifier_labels(path)  # refuses language models before transformers would bolt a random head onto one
    return _load(path, AutoModelForSequenceClassification, "sequence classifier",
                 "pass a model saved by `lmaudit train classifier` or a *ForSequenceClassification model", device,
                 trust_remote_code)


def _load(path: str | Path, auto_class, kind: str, advice: str, device: str, trust_remote_code: bool) -> LoadedModel:
    from transformers import AutoConfig

    quiet_transformers()
    folder = resolve_model_folder(path)
    check_model_folder(folder)
    try:
        config = AutoConfig.from_pretrained(folder, local_files_only=True, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:
        raise InputError(f"{folder}/config.json: unreadable model config ({str(err).splitlines()[0]})") from None
    try:
        model = auto_class.from_pretrained(
            folder, config=config, local_files_only=True, use_safetensors=True, trust_remote_code=trust_remote_code
        )
    except ValueError:
        raise InputError(f"{folder}: model type '{config.model_type}' is not a {kind}; {advice}") from None
    except OSError as err:
        raise InputError(f"{folder}: the weights could not be read ({str(err).splitlines()[0]})") from None
    tokenizer = load_tokenizer(folder, trust_remote_code)
    model.eval().to(device)
    return LoadedModel(model=model, tokenizer=tokenizer)


def load_tokenizer(path: str | Path, trust_remote_code: bool = False):
    """A model folder's tokenizer, or InputError saying why not."""
    from transformers import AutoTokenizer

    folder = resolve_model_folder(path)
    try:
        return AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:
        raise InputError(f"{folder}: no usable tokenizer files ({str(err).splitlines()[0]}); save the tokenizer with the model") from None


def load_model(path: str | Path, kind: str, device: str = "cpu", trust_remote_code: bool = False) -> LoadedModel:
    """Load a model of `kind` ('mlm', 'clm', 'classifier', or 'any': whatever family it is) for scoring."""
    family = model_family(path) if kind == "any" else kind
    loader = {"mlm": load_masked_lm, "clm": load_causal_lm, "classifier": load_classifier}[family]
    return loader(path, device=device, trust_remote_code=trust_remote_code)
