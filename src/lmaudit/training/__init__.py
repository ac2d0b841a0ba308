"""Canaries, checks and audits inside the user's own training script: `plant_canaries` and `add_canary_tokens` before
the trainer is built, `CanaryCallback` (pre-flight checks, the planting record) and `CheckpointAudit` (an audit at every
save) for transformers' Trainer and TRL's SFTTrainer, and `watch_dp_sgd` for an Opacus DP-SGD loop."""

from lmaudit.training.callback import CanaryCallback, CanaryCheckFailed
from lmaudit.training.checkpoint_audit import CheckpointAudit
from lmaudit.training.dp_watch import watch_dp_sgd
from lmaudit.training.planting import add_canary_tokens, canary_rows, canary_texts, plant_canaries, secret_only

__all__ = ["CanaryCallback", "CanaryCheckFailed", "CheckpointAudit", "add_canary_tokens", "canary_rows", "canary_texts",
           "plant_canaries", "secret_only", "watch_dp_sgd"]
