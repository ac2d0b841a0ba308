"""Load models (masked LM, causal LM, classifier) from a local folder or the local Hugging Face cache, safetensors only,
offline, optionally with a PEFT (LoRA) adapter on top, in a chosen weight dtype, device or accelerate device map;
fingerprint them; read what their config says."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from lmaudit.atomic import write_text
from lmaudit.errors import InputError
from lmaudit.models import quiet_peft, quiet_transformers

log = logging.getLogger(__name__)

FINGERPRINT_FILES = (
    "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "vocab.txt", "vocab.json", "merges.txt",
)


ADAPTER_CONFIG = "adapter_config.json"
SUMMARY_FILE = "lmaudit_training.json"  # what `lmaudit train` writes next to a model or adapter
WEIGHT_DTYPES = ("fp32", "bf16", "fp16")
QUANTIZATIONS = ("8bit", "4bit")


@dataclass
class LoadedModel:
    """A model in eval mode with its tokenizer."""

    model: object
    tokenizer: object


@dataclass(frozen=True)
class ModelSource:
    """A model to load: a folder written by save_pretrained (or a hub id in the local cache), and optionally the folder
    of a PEFT adapter (LoRA) applied on top of it. The base folder's config and tokenizer are the model's."""

    folder: str
    adapter: str | None = None

    def __str__(self) -> str:
        return self.folder if self.adapter is None else f"{self.folder} with adapter {self.adapter}"


def as_source(model: str | Path | ModelSource) -> ModelSource:
    """A ModelSource for a folder (or hub id), or the source itself."""
    return model if isinstance(model, ModelSource) else ModelSource(str(model))


@dataclass(frozen=True)
class Placement:
    """How weights are loaded and where they run: the device, the weights' dtype, an accelerate device map ('auto'
    spreads a model larger than one GPU over the GPUs and the CPU), bitsandbytes quantization, and whether code shipped
    with the model may run. dtype and quantization change the numbers, so they are part of the weights' fingerprint."""

    device: str = "cpu"
    dtype: str = "fp32"
    device_map: str | None = None
    quantization: str | None = None
    trust_remote_code: bool = False


DEFAULT_PLACEMENT = Placement()  # fp32 weights on the CPU


def model_fingerprint(model: str | Path | ModelSource) -> str:
    """SHA-256 over the weights, config, tokenizer and Python files of a model folder (with trust_remote_code the
    code computes the numbers too), and over the adapter's files when there is one (hex)."""
    source = as_source(model)
    folder = resolve_model_folder(source.folder)
    names = sorted(p.name for p in folder.iterdir() if p.suffix in (".safetensors", ".py") or p.name in FINGERPRINT_FILES)
    base = _files_digest(folder, _stat_key(folder, names))
    if source.adapter is None:
        return base
    return hashlib.sha256(f"{base}:{adapter_fingerprint(source.adapter)}".encode()).hexdigest()


def adapter_fingerprint(path: str | Path) -> str:
    """SHA-256 over a PEFT adapter folder's config and safetensors weights (hex)."""
    folder = Path(path)
    check_adapter_folder(folder)
    names = sorted(p.name for p in folder.iterdir() if p.suffix == ".safetensors" or p.name == ADAPTER_CONFIG)
    return _files_digest(folder, _stat_key(folder, names))


def weights_fingerprint(model: str | Path | ModelSource, placement: Placement) -> str:
    """The fingerprint of the numbers a model computes: its files' fingerprint, and the dtype and quantization its
    weights are loaded in when those are not the saved fp32 (a bf16 copy is another model to the signal store)."""
    files = model_fingerprint(model)
    if placement.dtype == "fp32" and placement.quantization is None:
        return files
    return hashlib.sha256(f"{files}:{placement.dtype}:{placement.quantization}".encode()).hexdigest()


def tokenizer_fingerprint(model: str | Path | ModelSource) -> str:
    """SHA-256 over a model folder's tokenizer files: equal for two models that tokenize alike."""
    folder = resolve_model_folder(as_source(model).folder)
    names = sorted(p.name for p in folder.iterdir() if p.name in FINGERPRINT_FILES and p.name != "config.json")
    return _files_digest(folder, _stat_key(folder, names))


def _stat_key(folder: Path, names: list[str]) -> tuple:
    return tuple((name, (folder / name).stat().st_size, (folder / name).stat().st_mtime_ns) for name in names)


@functools.lru_cache(maxsize=64)
def _files_digest(folder: Path, files: tuple) -> str:
    """Hash of the named files, cached on (name, size, mtime) in this process and on disk (`fingerprint_cache`): a
    model of many GB is read once, not at every run (measured: 1.2 s per run for a 1.6 GB model on this machine)."""
    remembered = fingerprint_cache() / hashlib.sha256(repr((str(folder.resolve()), files)).encode()).hexdigest()
    try:
        return remembered.read_text(encoding="utf-8").strip()
    except OSError:
        pass
    digest = hashlib.sha256()
    for name, _, _ in files:
        digest.update(name.encode())
        with open(folder / name, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    try:
        remembered.parent.mkdir(parents=True, exist_ok=True)
        write_text(remembered, digest.hexdigest())
    except OSError:  # a read-only home: hashing again next time is all it costs
        pass
    return digest.hexdigest()


def fingerprint_cache() -> Path:
    """Where model fingerprints are remembered across runs, by folder and each file's size and modification time:
    $LMAUDIT_CACHE_HOME/fingerprints (default ~/.cache/lmaudit/fingerprints)."""
    home = os.environ.get("LMAUDIT_CACHE_HOME") or Path.home() / ".cache" / "lmaudit"
    return Path(home) / "fingerprints"


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


# A tokenizer's vocabulary is in one of these (fast tokenizers, WordPiece, BPE, SentencePiece).
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "tokenizer.model", "spiece.model",
                   "sentencepiece.bpe.model")


def check_model_folder(path: Path) -> None:
    """Refuse a model folder that is missing, has no config or has no safetensors weights."""
    if not path.is_dir():
        raise InputError(f"{path}: no such model folder; pass a folder written by save_pretrained or `lmaudit train`")
    if (path / ADAPTER_CONFIG).is_file() and not (path / "config.json").is_file():
        base = _adapter_base(path)
        raise InputError(f"{path}: a PEFT adapter, not a whole model; pass its base model as the model "
                         f"({base or 'the folder it was trained on'}) and this folder as --adapter")
    if not (path / "config.json").is_file():
        raise InputError(f"{path}: no config.json; pass a folder written by save_pretrained")
    if not any(path.glob("*.safetensors")):
        raise InputError(
            f"{path}: no .safetensors weights (lmaudit does not load pickled .bin weights); "
            "re-save the model with save_pretrained(..., safe_serialization=True)"
        )
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        # Without them transformers would build an empty tokenizer and score every word as unknown.
        raise InputError(f"{path}: no tokenizer files ({', '.join(TOKENIZER_FILES)}); save the tokenizer with the "
                         "model (tokenizer.save_pretrained(folder))")


def checked_source(model: str | Path | ModelSource) -> ModelSource:
    """The source with its folder resolved (a hub id becomes the cached folder), after checking the folder and adapter."""
    source = as_source(model)
    folder = resolve_model_folder(source.folder)
    check_model_folder(folder)
    if source.adapter is not None:
        check_adapter_folder(Path(source.adapter))
    return ModelSource(str(folder), source.adapter)


def check_adapter_folder(path: Path) -> None:
    """Refuse an adapter folder that is missing or has no adapter_config.json or no safetensors weights."""
    if not path.is_dir() or not (path / ADAPTER_CONFIG).is_file():
        raise InputError(f"{path}: not a PEFT adapter folder (no {ADAPTER_CONFIG}); pass a folder written by "
                         "`lmaudit train ... --lora` or a PEFT model's save_pretrained")
    if not any(path.glob("*.safetensors")):
        raise InputError(f"{path}: no .safetensors adapter weights (lmaudit does not load pickled .bin weights); "
                         "re-save the adapter with save_pretrained(..., safe_serialization=True)")


def _adapter_base(path: Path) -> str | None:
    import json

    try:
        return json.loads((path / ADAPTER_CONFIG).read_text(encoding="utf-8")).get("base_model_name_or_path")
    except (OSError, ValueError):
        return None


def load_masked_lm(model: str | Path | ModelSource, placement: Placement = DEFAULT_PLACEMENT) -> LoadedModel:
    """Load a masked LM and its tokenizer for scoring (eval mode), or raise InputError saying why not."""
    from transformers import AutoModelForMaskedLM

    loaded = _load(model, AutoModelForMaskedLM, "masked language model",
                   "pass a BERT-, RoBERTa- or DistilBERT-style masked LM", placement)
    if loaded.tokenizer.mask_token_id is None:
        raise InputError(f"{model}: the tokenizer has no mask token, so this is not a masked LM")
    return loaded


def load_causal_lm(model: str | Path | ModelSource, placement: Placement = DEFAULT_PLACEMENT) -> LoadedModel:
    """Load a causal (GPT-style) LM and its tokenizer for scoring, or raise InputError saying why not."""
    from transformers import AutoModelForCausalLM

    loaded = _load(model, AutoModelForCausalLM, "causal language model", "pass a GPT-2-style causal LM or use an MLM signal",
                   placement)
    # transformers would load a BERT masked LM as BertLMHeadModel and score it left to right: meaningless numbers.
    architectures = loaded.model.config.architectures or []
    if architectures and not any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in architectures):
        raise InputError(f"{model}: saved as {', '.join(architectures)}, not a causal LM; use --signal mlm_energy or mlm_pll")
    return loaded


FAMILY_SUFFIXES = ((("ForMaskedLM",), "mlm"), (("ForCausalLM", "LMHeadModel"), "clm"), (("ForSequenceClassification",), "classifier"))


def family_of(class_names: list[str]) -> str | None:
    """'mlm', 'clm' or 'classifier' for a model of these classes (config.json's architectures, or type(model).__name__)."""
    for suffixes, family in FAMILY_SUFFIXES:
        if any(name.endswith(suffixes) for name in class_names):
            return family
    return None


def model_family(model: str | Path | ModelSource) -> str:
    """'mlm', 'clm' or 'classifier', from the architecture saved in config.json."""
    import json

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
    import json

    config = json.loads((resolve_model_folder(as_source(model).folder) / "config.json").read_text(encoding="utf-8"))
    return any(key in config for key in ("num_attention_heads", "n_head", "n_heads"))


ARCHITECTURE_KEYS = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_layers")


def architecture_difference(first: str | Path | ModelSource, second: str | Path | ModelSource) -> str | None:
    """How two models' architectures differ (model type, width, depth, heads), from config.json; None if they don't."""
    import json

    configs = [json.loads((resolve_model_folder(as_source(m).folder) / "config.json").read_text(encoding="utf-8"))
               for m in (first, second)]
    differences = [f"{key} {configs[0].get(key)} vs {configs[1].get(key)}" for key in ARCHITECTURE_KEYS
                   if configs[0].get(key) != configs[1].get(key)]
    return ", ".join(differences) or None


def classifier_labels(model: str | Path | ModelSource) -> list[str]:
    """A classifier's label names in output order: from its config.json (id2label), or, for a classifier adapter trained
    by lmaudit on a base model without a classification head, from the adapter's training summary."""
    import json

    source = as_source(model)
    if source.adapter is not None:
        summary = Path(source.adapter) / SUMMARY_FILE
        labels = json.loads(summary.read_text(encoding="utf-8")).get("labels") if summary.is_file() else None
        if labels:
            return [str(label) for label in labels]
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


def load_classifier(model: str | Path | ModelSource, placement: Placement = DEFAULT_PLACEMENT) -> LoadedModel:
    """Load a sequence classifier (BERT-style or lmaudit's LSTM) and its tokenizer, or raise InputError saying why not."""
    from transformers import AutoModelForSequenceClassification

    import lmaudit.models.lstm  # noqa: F401  (registers the LSTM classifier with the Auto classes)

    labels = classifier_labels(model)  # refuses language models before transformers would bolt a random head onto one
    # An adapter's head (saved with it) replaces whatever head the base has: the base is built with the adapter's labels.
    head = ({"num_labels": len(labels), "id2label": dict(enumerate(labels)),
             "label2id": {name: index for index, name in enumerate(labels)}} if as_source(model).adapter else {})
    return _load(model, AutoModelForSequenceClassification, "sequence classifier",
                 "pass a model saved by `lmaudit train classifier` or a *ForSequenceClassification model", placement, head)


def _load(model: str | Path | ModelSource, auto_class, kind: str, advice: str, placement: Placement,
          config_updates: dict | None = None) -> LoadedModel:
    from transformers import AutoConfig

    quiet_transformers()
    source = as_source(model)
    folder = resolve_model_folder(source.folder)
    check_model_folder(folder)
    if placement.trust_remote_code:
        warn_remote_code(folder)
    try:
        config = AutoConfig.from_pretrained(folder, local_files_only=True, trust_remote_code=placement.trust_remote_code)
    except (OSError, ValueError) as err:
        raise InputError(f"{folder}/config.json: unreadable model config ({str(err).splitlines()[0]})") from None
    config.update(config_updates or {})
    try:
        network, loading = auto_class.from_pretrained(
            folder, config=config, local_files_only=True, use_safetensors=True, output_loading_info=True,
            trust_remote_code=placement.trust_remote_code, **_weight_options(placement))
    except ValueError:
        raise InputError(f"{folder}: model type '{config.model_type}' is not a {kind}; {advice}") from None
    except Exception as err:  # a truncated or corrupt file: safetensors, torch and transformers each raise their own
        raise InputError(f"{folder}: the weights could not be read ({type(err).__name__}: "
                         f"{(str(err).splitlines() or [''])[0]}); copy the model folder again") from None
    if loading["missing_keys"] and source.adapter is None:  # an adapter may carry the missing head (modules_to_save)
        missing = sorted(loading["missing_keys"])
        raise InputError(f"{folder}: {len(missing)} weights of a {kind} are not in the checkpoint and would be "
                         f"initialised at random ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}): the "
                         f"folder holds a {', '.join(config.architectures or ['model of another kind'])}, not a "
                         f"{kind}; {advice}")
    if source.adapter is not None:
        network = with_adapter(network, Path(source.adapter), merge=placement.quantization is None)
    tokenizer = load_tokenizer(folder, placement.trust_remote_code)
    fuse_activations(network)
    network.eval()
    if placement.device_map is None and placement.quantization is None:
        network.to(placement.device)
    return LoadedModel(model=network, tokenizer=tokenizer)


def fuse_activations(network) -> None:
    """Swap transformers' tanh-approximate GELU written as Python tensor ops ('gelu_new': GPT-2, Phi) for torch's fused
    kernel of the same formula. Measured on 2 CPU cores: 6.7x faster on a GPT-2 MLP's activations, within 2.4e-7 of it."""
    from transformers.activations import ACT2FN, NewGELUActivation

    for module in list(network.modules()):
        for name, child in list(module.named_children()):
            if type(child) is NewGELUActivation:
                setattr(module, name, ACT2FN["gelu_pytorch_tanh"])


def _weight_options(placement: Placement) -> dict:
    """from_pretrained's keyword arguments for the placement's dtype, device map and quantization."""
    import torch

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[placement.dtype]
    options: dict = {"dtype": dtype}
    if placement.device_map is not None:
        options["device_map"] = placement.device_map
    if placement.quantization is not None:
        options["quantization_config"] = _quantization_config(placement)
        options.setdefault("device_map", placement.device if placement.device != "cpu" else "auto")
    return options


def _quantization_config(placement: Placement):
    import importlib.util

    import torch

    if importlib.util.find_spec("bitsandbytes") is None:
        raise InputError(f"--quantization {placement.quantization} needs bitsandbytes: pip install 'lmaudit[gpu]'")
    if not torch.cuda.is_available():
        raise InputError(f"--quantization {placement.quantization}: bitsandbytes quantization needs a CUDA GPU here")
    from transformers import BitsAndBytesConfig

    compute = torch.float32 if placement.dtype == "fp32" else {"bf16": torch.bfloat16, "fp16": torch.float16}[placement.dtype]
    if placement.quantization == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True)
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=compute)


def with_adapter(network, adapter: Path, merge: bool = True):
    """The model with the PEFT adapter in `adapter` applied: merged into the weights (one model, the base's speed), or,
    for quantized weights that cannot take a merge, kept as adapter layers inside the base model."""
    from peft import PeftModel

    check_adapter_folder(adapter)
    try:
        with quiet_peft():
            wrapped = PeftModel.from_pretrained(network, adapter, is_trainable=False)
    except (OSError, ValueError, KeyError, RuntimeError) as err:
        raise InputError(f"{adapter}: this adapter does not fit the base model ({str(err).splitlines()[0]}); pass the "
                         f"base it was trained on ({_adapter_base(adapter) or 'see its adapter_config.json'})") from None
    return wrapped.merge_and_unload() if merge else wrapped.get_base_model()


# What a tokenizer saved from a plain `tokenizers` object calls its class: it is exactly its tokenizer.json.
GENERIC_TOKENIZER_CLASSES = ("TokenizersBackend", "PreTrainedTokenizerFast")


def _saved_tokenizer_class(folder: Path) -> str | None:
    try:
        return json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8")).get("tokenizer_class")
    except (OSError, ValueError, AttributeError):
        return None


@functools.cache
def warn_remote_code(folder: Path) -> None:
    """Log, once per folder, that trust_remote_code lets the folder's own Python files run with the user's rights."""
    code = sorted(p.name for p in folder.glob("*.py"))
    log.warning("trust_remote_code is on: loading %s runs %s with your permissions; use it only for a folder whose "
                "code you have read", folder, ", ".join(code) if code else "the code its config names")


def load_tokenizer(path: str | Path | ModelSource, trust_remote_code: bool = False):
    """A model folder's tokenizer, or InputError saying why not."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    folder = resolve_model_folder(as_source(path).folder)
    if trust_remote_code:
        warn_remote_code(folder)
    try:
        if _saved_tokenizer_class(folder) in GENERIC_TOKENIZER_CLASSES and (folder / "tokenizer.json").is_file():
            # AutoTokenizer would pick the model type's own tokenizer class (a Qwen2 folder gets Qwen2's
            # pre-tokenizer), not the tokenizer that was saved and trained with.
            return PreTrainedTokenizerFast.from_pretrained(folder, local_files_only=True)
        return AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:
        raise InputError(f"{folder}: no usable tokenizer files ({str(err).splitlines()[0]}); save the tokenizer with the model") from None


# Text that exercises a tokenizer's normalisation: case, accents, digits, punctuation, spacing.
TOKENIZER_PROBE = "Patient ÉMILE Dupont, 47 y/o: BP 142/91 mmHg;  no café-au-lait spots. naïve"


def tokenizer_difference(first: str | Path | ModelSource, second: str | Path | ModelSource,
                         trust_remote_code: bool = False) -> str | None:
    """How two models' tokenizers differ (vocabulary, special tokens aside, or how they normalise and split a probe text),
    or None."""
    one, two = load_tokenizer(first, trust_remote_code), load_tokenizer(second, trust_remote_code)
    vocabulary, other = one.get_vocab(), two.get_vocab()
    # A special token added to one (a padding token, say) never appears in a text's tokens: it does not unpair masks.
    special = {*one.all_special_tokens, *two.all_special_tokens}
    only = (set(vocabulary) ^ set(other)) - special
    renumbered = sum(vocabulary[t] != other[t] for t in set(vocabulary) & set(other))
    if only or renumbered:
        return f"vocabularies of {len(vocabulary)} and {len(other)} tokens, {len(only)} in one only, {renumbered} renumbered"
    if one(TOKENIZER_PROBE, add_special_tokens=False)["input_ids"] != two(TOKENIZER_PROBE, add_special_tokens=False)["input_ids"]:
        return "the same vocabulary, but they normalise or split text differently (case, accents or pre-tokenisation)"
    return None


def load_model(model: str | Path | ModelSource, kind: str, placement: Placement = DEFAULT_PLACEMENT) -> LoadedModel:
    """Load a model of `kind` ('mlm', 'clm', 'classifier', or 'any': whatever family it is) for scoring."""
    family = model_family(model) if kind == "any" else kind
    loader = {"mlm": load_masked_lm, "clm": load_causal_lm, "classifier": load_classifier}[family]
    return loader(model, placement)
