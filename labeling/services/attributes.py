"""Subject and image attributes as filters take a plain name: never a Django lookup.

``Q(**{f"attributes__{key}": value})`` reads ``key`` as a path into the JSON *and* as lookups, so a
key such as ``foo__regex`` or ``foo__isnull`` turned a filter into another query (a 500 on a bad
regular expression, and operators nobody documented). Filters accept one operator, equality.
"""

import re

_NAME = re.compile(r"[^\W_]+(?:_[^\W_]+)*")


def attribute_key_valid(key: str) -> bool:
    """Letters, digits and single underscores (not first or last), at most 100 characters.

    Examples
    --------
    >>> [attribute_key_valid(k) for k in ("age", "skin_type", "foo__regex", "_x", "x_", "a b", "")]
    [True, True, False, False, False, False, False]
    """
    return bool(key) and len(key) <= 100 and _NAME.fullmatch(key) is not None
