"""Synthetic user posts for classification audits: users write several texts on labelled topics.

Each user has one to three favourite topics (popular topics are favoured, so some topics are
rare), a handful of personal words (nicknames, slang, places) that recur in their posts, and
their own share of off-topic chatter. Topic words are a minority of each post and one post in
ten borrows words from another topic, so a classifier has to memorise part of its training set
to fit it: the generalisation gap that sample-level attacks exploit. The personal words tie a
user's posts together, which is what makes a whole user easier to recognise than one post.
Deterministic by seed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

TOPICS = {
    "cooking": "recipe oven garlic simmer dough saute butter basil roast skillet broth whisk pastry marinade spice "
               "flour bake onion chili noodle",
    "football": "goal striker keeper penalty league midfield coach tackle offside derby kickoff referee stadium "
                "transfer fixture dribble header corner winger",
    "gardening": "soil compost seedling prune tomato mulch weeds trellis bulbs harvest greenhouse fertilizer roses "
                 "hedge shovel sprout watering perennial orchard",
    "finance": "stocks bonds dividend portfolio index inflation mortgage budget savings broker yield equity "
               "pension invoice crypto hedge interest loan etf",
    "travel": "flight hostel passport itinerary luggage visa airport backpack beach museum train layover "
              "booking ferry hiking sightseeing souvenir jetlag map",
    "music": "guitar chord album drummer melody lyrics concert vinyl bassline tempo synth chorus playlist "
             "riff amplifier vocals tour piano encore",
    "gaming": "console quest respawn loot controller raid patch speedrun boss multiplayer server pixel "
              "leaderboard shooter rpg mod lag achievement arcade",
    "astronomy": "telescope nebula galaxy orbit comet eclipse planet lens meteor constellation supernova "
                 "observatory lunar asteroid star aurora rover cosmos parsec",
}
FILLER = (
    "i you we they it this that really just think know like get got going would could maybe today yesterday "
    "week always never still though actually honestly pretty quite much more some any every thing stuff time "
    "people friend guys lol anyway also again after before well yes no okay sure right good bad great new old "
    "first last best little big long day night morning weekend year"
).split()
SYLLABLES = "ka lo mi ru ze po ta vin dor fal gri hu jex nu qua sil tor ub wey xan yol zu bre cha".split()


def _personal_words(rng: np.random.Generator, count: int) -> list[str]:
    """Made-up words (three syllables) that only this user writes."""
    return ["".join(rng.choice(SYLLABLES, size=3)) for _ in range(count)]


def generate_user_posts(n_users: int = 200, seed: int = 0, posts_per_user: tuple[int, int] = (8, 16),
                        n_topics: int = len(TOPICS)) -> pd.DataFrame:
    """One row per post: sample_id, group_id (the user), text, label (the topic); each user writes between
    `posts_per_user` posts (inclusive) on the first `n_topics` topics (2 to 8)."""
    if not 2 <= n_topics <= len(TOPICS):
        raise ValueError(f"n_topics must be between 2 and {len(TOPICS)}, not {n_topics}")
    rng = np.random.default_rng(seed)
    topics = list(TOPICS)[:n_topics]
    topic_words = {t: TOPICS[t].split() for t in topics}
    popularity = 1.0 / np.arange(1, len(topics) + 1) ** 1.3
    popularity /= popularity.sum()
    rows = []
    for user in range(n_users):
        user_id = f"u{user:04d}"
        n_favourites = int(rng.integers(1, min(3, n_topics) + 1))
        favourites = list(rng.choice(topics, size=n_favourites, replace=False, p=popularity))
        personal = _personal_words(rng, 5)
        chatter = float(rng.uniform(0.6, 0.8))
        for post in range(int(rng.integers(posts_per_user[0], posts_per_user[1] + 1))):
            topic = favourites[int(rng.integers(len(favourites)))] if rng.random() < 0.9 else str(rng.choice(topics))
            borrowed = str(rng.choice([t for t in topics if t != topic])) if rng.random() < 0.3 else None
            words = []
            for _ in range(int(rng.integers(6, 20))):
                draw = rng.random()
                if draw < chatter:
                    words.append(str(rng.choice(FILLER)))
                elif draw < chatter + 0.12:
                    words.append(str(rng.choice(personal)))
                elif borrowed is not None and rng.random() < 0.5:
                    words.append(str(rng.choice(topic_words[borrowed])))
                else:
                    words.append(str(rng.choice(topic_words[topic])))
            rows.append({"sample_id": f"{user_id}-p{post:02d}", "group_id": user_id, "text": " ".join(words), "label": topic})
    return pd.DataFrame(rows)
