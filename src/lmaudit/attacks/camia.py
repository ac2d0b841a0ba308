"""CAMIA (Chang et al., EMNLP 2025): the shape of a text's per-token log-probabilities, not only their mean. A member's
loss falls fast and stays low along the text, and a repeated copy of it gains less than a non-member's (it was already
known). Each feature below is computed from the target's per-token log-probabilities of the text and of the text
repeated (REPEATS copies joined by spaces, one more pass), each turned into a p-value against the population (its
percentile rank among the population's values, as scipy's percentileofscore with kind 'rank'), and the score is minus
their mean (the paper's label-free rule; it ranks as Edgington's method does). Higher = likelier a member.

Every feature is oriented so that members are lower before its p-value is taken. The authors' code picks each sign
from the true labels of the whole audited set, which leaks them; lmaudit picks it from calibration members (known
members, never audited) against the population: a feature whose calibration members lie above the population is
negated. The features, as the paper's code lists them (cut-offs beyond a text's length read the whole text):
mean log p and perplexity at the first T' tokens (all, 200, 300); token diversity (distinct ids / ids) and both
divided by it; the share of the first 200 tokens with log p >= tau (tau -1, -2, -3); the number of tokens above their
own mean and the share above the mean of those before them (all, 200, 300); the Lempel-Ziv complexity of the first
200 values in 3, 4 and 5 bins; the slope and the approximate entropy (m 8, r 0.8 sd) of the repeated text's values;
and copy 1's features 1-8 (diversity excepted) less copy 2's and less copy 3's.
"""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import (
    REPEATED_LOG_PROBS,
    TARGET_LOSS,
    TOKEN_IDS,
    TOKEN_LOG_PROBS,
    AttackInput,
    AttackSpec,
    NotRun,
    Scored,
    evaluated_rows,
    score_frame,
)
from lmaudit.data.roles import CALIBRATION_MEMBER, POPULATION

REPEATS = 6
CUTOFFS = (None, 200, 300)
TAUS = (-1.0, -2.0, -3.0)
LZ_BINS = (3, 4, 5)


def lempel_ziv(symbols: np.ndarray) -> float:
    """LZ76 phrase count of a sequence of small non-negative integers over its length: each phrase is the shortest
    piece not already seen starting earlier (overlap allowed)."""
    text, n = "".join(chr(65 + int(symbol)) for symbol in symbols), len(symbols)
    if n == 0:
        return np.nan
    phrases, start = 0, 0
    while start < n:
        length = 1
        while start + length <= n and text[start:start + length] in text[:start + length - 1]:
            length += 1
        phrases += 1
        start += length
    return phrases / n


def approximate_entropy(values: np.ndarray, m: int = 8, r_share: float = 0.8) -> float:
    """Pincus' approximate entropy ApEn(m, r) with r = r_share * sd (Chebyshev distance, self-matches counted)."""
    values = np.asarray(values, dtype=float)
    if len(values) <= m + 1:
        return np.nan
    r = r_share * values.std()

    def phi(order: int) -> float:
        windows = np.lib.stride_tricks.sliding_window_view(values, order)
        close = (np.abs(windows[:, None, :] - windows[None, :, :]).max(axis=2) <= r).mean(axis=1)
        return float(np.mean(np.log(close)))

    return phi(m) - phi(m + 1)


def _quantised(values: np.ndarray, bins: int) -> np.ndarray:
    """The paper's two-step quantisation: 100 edges over [min, 0], then `bins` equal bins of those levels."""
    edges = np.linspace(min(values.min(), -1e-9), 0.0, 100)
    return np.minimum(np.digitize(values, edges) * bins // 101, bins - 1)


def text_features(log_probs: np.ndarray, ids: np.ndarray) -> list[float]:
    """Features 1-8 of one text's log-probabilities (and token ids, for diversity), in a fixed order."""
    features = []
    for cut in CUTOFFS:
        head, head_ids = log_probs[:cut], ids[:cut]
        mean, diversity = head.mean(), len(np.unique(head_ids)) / len(head_ids)
        prefix_means = np.cumsum(head)[:-1] / np.arange(1, len(head))
        features += [mean, np.exp(-mean), diversity, mean / diversity, np.exp(-mean) / diversity,
                     float(np.sum(head > mean)), float(np.mean(head[1:] > prefix_means)) if len(head) > 1 else np.nan]
    features += [float(np.mean(log_probs[:200] >= tau)) for tau in TAUS]
    features += [lempel_ziv(_quantised(log_probs[:200], bins)) for bins in LZ_BINS]
    return features


PER_CUTOFF = 7  # text_features' features at each cut-off, diversity third
DIVERSITY_COLUMNS = [PER_CUTOFF * cut + 2 for cut in range(len(CUTOFFS))]  # the repetition deltas leave diversity out


def repeated_features(repeated: np.ndarray, ids: np.ndarray) -> list[float]:
    """Slope and approximate entropy of the repeated text's values, and copy 1's features less copies 2's and 3's
    (copies located by the text's own token count: one copy tokenizes as the text does)."""
    length = len(ids)
    slope = float(np.polyfit(np.arange(len(repeated)), repeated, 1)[0]) if len(repeated) > 1 else np.nan
    features = [slope, approximate_entropy(repeated)]
    copies = [repeated[k * length:(k + 1) * length] for k in range(3)]
    first = np.delete(np.array(text_features(copies[0], ids)), DIVERSITY_COLUMNS)
    for copy in copies[1:]:
        usable = len(copy) == length
        other = np.delete(np.array(text_features(copy, ids)), DIVERSITY_COLUMNS) if usable else np.full_like(first, np.nan)
        features += list(first - other)
    return features


def camia_features(token_log_probs: np.ndarray, token_ids: np.ndarray, repeated_log_probs: np.ndarray) -> np.ndarray:
    """(n, features) from NaN-padded per-token log-probabilities and ids of the texts and of their repeats."""
    rows = []
    for values, ids, repeated in zip(token_log_probs, token_ids, repeated_log_probs, strict=True):
        kept = ~np.isnan(values)
        values, ids, repeated = values[kept], ids[kept], repeated[~np.isnan(repeated)]
        rows.append(text_features(values, ids) + repeated_features(repeated, ids))
    return np.array(rows, dtype=float)


def population_p_values(features: np.ndarray, population: np.ndarray, own: np.ndarray | None = None) -> np.ndarray:
    """Per feature column, each row's percentile rank among the population's values, as a share (ties averaged); a row
    flagged in `own` is a population sample itself, ranked among the others (its own value left out: a threshold
    calibrated on population scores must see them as it sees a non-member's)."""
    own = np.zeros(len(features), bool) if own is None else np.asarray(own, bool)
    p = np.empty_like(features)
    for column in range(features.shape[1]):
        reference = np.sort(population[:, column][~np.isnan(population[:, column])])
        below = np.searchsorted(reference, features[:, column], side="left")
        at_or_below = np.searchsorted(reference, features[:, column], side="right") - own
        # scipy's percentileofscore(kind="rank"), which the paper's code calls: a value found counts one more half
        p[:, column] = (below + at_or_below + (at_or_below > below)) / (2.0 * np.maximum(len(reference) - own, 1))
    return np.where(np.isnan(features), np.nan, p)


def orientation(known_members: np.ndarray, population: np.ndarray) -> np.ndarray:
    """Per feature, -1 where calibration members' median lies above the population's (members then lower), else +1."""
    return np.where(np.nanmedian(known_members, axis=0) > np.nanmedian(population, axis=0), -1.0, 1.0)


def camia_score(features: np.ndarray, known_members: np.ndarray, population: np.ndarray,
                own: np.ndarray | None = None) -> np.ndarray:
    """-mean over features of the population p-values, features oriented on `known_members` against `population`
    (`own`: the rows that are population samples, each ranked without itself)."""
    signs = orientation(known_members, population)
    return -np.nanmean(population_p_values(features * signs, population * signs, own), axis=1)


def build(data: AttackInput) -> Scored | NotRun:
    """Scores of the audited and population samples; features oriented on the calibration members."""
    roles = data.samples["role"].to_numpy()
    if not (roles == CALIBRATION_MEMBER).any():
        return NotRun("CAMIA orients its features on calibration members (known members, never audited), not on the "
                      "audited labels as the authors' code does: give --calibration-members")
    features = camia_features(data.values[TOKEN_LOG_PROBS], data.values[TOKEN_IDS], data.values[REPEATED_LOG_PROBS])
    rows = evaluated_rows(data)
    scores = camia_score(features[rows], features[roles == CALIBRATION_MEMBER], features[roles == POPULATION],
                         roles[rows] == POPULATION)
    return Scored(score_frame(data.samples[rows], scores), calibration={"features": features.shape[1],
                                                                         "repeats": REPEATS})


SPEC = AttackSpec(
    name="camia",
    description="CAMIA: the shape of the per-token loss along the text and over repeated copies, each feature a "
                "population p-value, oriented on calibration members",
    reads=(TARGET_LOSS, TOKEN_LOG_PROBS, TOKEN_IDS, REPEATED_LOG_PROBS),
    build=build,
    fitted_on=(CALIBRATION_MEMBER, POPULATION),
    score_label="membership score = -mean over features of the population p-value (members lower)",
    paper="Chang et al. 2025, Context-aware membership inference attacks against pre-trained large language models "
          "(EMNLP)",
)
