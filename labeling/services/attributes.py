"""Subject and image attributes as filters take a plain name: never a Django lookup.

``Q(**{f"attributes__{key}": value})`` reads ``key`` as a path into the JSON *and* as lookups, so a
key such as ``foo__regex`` or ``foo__isnull`` turned a filter into another query (a 500 on a bad
regular expression, and operators nobody documented). Filters accept one operator, equality.
"""

import re

from django.db.models import Q

_NAME = re.compile(r"[^\W_]+(?:_[^\W_]+)*")


def attribute_key_valid(key: str) -> bool:
    """Letters, digits and single underscores (not first or last), at most 100 characters.

    Examples
    --------
    >>> [attribute_key_valid(k) for k in ("age", "skin_type", "foo__regex", "_x", "x_", "a b", "")]
    [True, True, False, False, False, False, False]
    """
    return bool(key) and len(key) <= 100 and _NAME.fullmatch(key) is not None


def attribute_condition(name: str, value: str) -> Q:
    """Images whose subject or own attribute ``name`` equals ``value``: as text whatever its case ("Woman"
    finds "woman"), and as a number when it is one. The one rule of every attribute filter (the Images page,
    the images API, the data manager). ``name`` must pass :func:`attribute_key_valid`.

    Examples
    --------
    >>> str(attribute_condition("gender", "Woman")).count("iexact")
    2
    """
    condition = Q(**{f"subject__attributes__{name}__iexact": value}) | Q(**{f"attributes__{name}__iexact": value})
    # Numbers are stored as numbers in JSON; match them too.
    for cast in (int, float):
        try:
            number = cast(value)
        except ValueError:
            continue
        condition |= Q(**{f"subject__attributes__{name}": number}) | Q(**{f"attributes__{name}": number})
    return condition
