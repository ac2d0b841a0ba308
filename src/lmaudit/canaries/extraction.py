"""Does the model give a canary's secret back? Greedy decoding from each secret canary's text before its secret,
compared token for token with the secret (extraction's pass, `audit/extraction.py:extraction_section`): Carlini et
al.'s question beside the exposure, without a key. Causal LMs whose weights lmaudit loads; none for a served model
or a masked LM."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from lmaudit.data.roles import NONMEMBER, NONMEMBER_SET

if TYPE_CHECKING:
    from lmaudit.audit.records import ResolvedAudit


def secret_spans(ids: list[list[int]], secrets: list[list[int]]) -> list[tuple[int, int] | None]:
    """Each canary's (start, length) of its secret's last occurrence among its token ids; None where it is not found
    (a tokenizer that splits the secret otherwise in context)."""
    from lmaudit.canaries.span import secret_positions

    spans = []
    for row, secret in zip(ids, secrets, strict=True):
        positions = secret_positions(row, secret)
        spans.append(None if positions is None else (int(positions[0]), len(positions)))
    return spans


def secrets_given_back(audit: ResolvedAudit, canaries: pd.DataFrame) -> np.ndarray | None:
    """(n,) whether greedy decoding from each canary's tokens before its secret reproduces the secret exactly (False
    where the secret is not found in context); None where the target is served or not a causal LM."""
    from lmaudit.audit.extraction import extraction_section
    from lmaudit.canaries.span import secret_token_ids
    from lmaudit.models.text import text_ids
    from lmaudit.signals.compute import loaded_models
    from lmaudit.signals.sampling import ExtractionSettings

    if audit.target.served is not None or audit.target_family != "clm":
        return None
    [loaded] = loaded_models((audit.target,), "clm", audit.placement)
    spans = secret_spans(text_ids(loaded.tokenizer, canaries["text"].tolist()),
                         secret_token_ids(loaded.tokenizer, canaries["secret"]))
    given_back = np.zeros(len(canaries), bool)
    rows = canaries.assign(role=NONMEMBER, **{NONMEMBER_SET: "canaries"}).reset_index(drop=True)
    for span in sorted({span for span in spans if span is not None}):
        chosen = np.flatnonzero([found == span for found in spans])
        settings = ExtractionSettings(prefix_tokens=(span[0],), suffix_tokens=span[1], schemes=())
        _, table = extraction_section(audit, rows.iloc[chosen], settings)
        exact = table.set_index("sample_id")["exact"]
        given_back[chosen] = exact.reindex(rows["sample_id"].iloc[chosen]).fillna(False).to_numpy(bool)
    return given_back
