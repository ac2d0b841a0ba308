"""The erasure audit's extraction estimate: does the causal LM before, and after, erasure continue a forget text's
prefix with its very suffix (greedy decoding, `audit/extraction.py`'s pass), and a holdout text's? Token ids are
compared in memory; nothing of a text is written."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lmaudit.audit.extraction import extraction_section
from lmaudit.audit.records import resolve
from lmaudit.config import AuditConfig
from lmaudit.data.roles import MEMBER, NONMEMBER_SET
from lmaudit.metrics.erasure_extraction import ErasureExtraction, extraction_shares
from lmaudit.models.source import ModelSource
from lmaudit.signals.sampling import ExtractionSettings


def erasure_extraction(config: AuditConfig, models: dict[str, ModelSource], corpus: pd.DataFrame, tokens: int,
                       subjects: np.ndarray, progress: bool) -> tuple[ErasureExtraction | None, list[str]]:
    """Before and after erasure: the shares of forget and holdout texts (and subjects) whose next `tokens` tokens
    greedy decoding reproduces from their first `tokens`; or None and a warning where no audited text is that long."""
    audited = (corpus["role"].eq(MEMBER) | corpus[NONMEMBER_SET].eq("holdout")).to_numpy()
    texts = corpus[audited].reset_index(drop=True)
    settings = ExtractionSettings(prefix_tokens=(tokens,), suffix_tokens=tokens, schemes=())
    shares = []
    for name in ("before", "after"):
        source = models[name]
        resolved = resolve(config.model_copy(update={"target": source.folder, "adapter": source.adapter}), progress)
        _, table = extraction_section(resolved, texts, settings)
        if table.empty:
            return None, [f"no forget or holdout text has {2 * tokens} tokens, so extraction was not tested; give a "
                        "smaller --extraction-tokens"]
        kept = texts["sample_id"].isin(set(table["sample_id"])).to_numpy()
        exact = table.set_index("sample_id").loc[texts.loc[kept, "sample_id"], "exact"].to_numpy(bool)
        shares.append(extraction_shares(name, exact, texts.loc[kept, "role"].eq(MEMBER).to_numpy(),
                                        subjects[audited][kept]))
    return ErasureExtraction(tokens, shares), []
