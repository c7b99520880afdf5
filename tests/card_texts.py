"""The data card's texts a release request needs, for tests and benches: one text per required field of
``labeling.services.releases.rules.CARD_FIELDS``, so a new required field is filled everywhere at once.

Importable before Django is set up (the benches import it at the top): ``CARD_FIELDS`` is read when the
texts are made, after ``django.setup()``.
"""

from __future__ import annotations


def card_texts_for_tests(**explicit: str) -> dict[str, str]:
    """A text for every required card field (each naming its field, so no two are alike), ``explicit``
    ones as given: name there the texts a test looks for in the card (an unknown field is a KeyError)."""
    from labeling.services.releases.rules import CARD_FIELDS

    unknown = sorted(set(explicit) - set(CARD_FIELDS))
    if unknown:
        raise KeyError(f"not a card field: {', '.join(unknown)}")
    texts = {key: f"{field['title']} (test text for {key})." for key, field in CARD_FIELDS.items() if field["required"]}
    texts.update(explicit)
    return texts
