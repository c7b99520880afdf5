"""Text written by people (a lead's card fields, a subject's id in an erasure notice) inside Markdown files.

One rule for every Markdown file the app writes (the data card, the erasure notice, ``ERASURE_NOTICE.md``):
:func:`escape_markdown_text` keeps the words and neutralises structure, so that what a lead or an imported
manifest wrote can neither inject HTML (a viewer that renders raw HTML in Markdown would run it) nor turn into
links, images, tables, headings or list items.
"""

from __future__ import annotations

import re
from typing import Any

# At the start of a line, these make a heading, a quote, a list item or a rule.
_LINE_START = re.compile(r"^(\s*)([#>+*-]|\d+[.)])")


def escape_markdown_text(text: Any) -> str:
    """``text`` as one line of inline Markdown: HTML's ``& < >`` as entities, link, image, table and emphasis
    syntax escaped with backslashes (not ``_``: ids such as ``S_001`` stay readable), a leading heading/quote/list marker escaped, line breaks as spaces.

    >>> escape_markdown_text('<img src=x onerror=alert(1)> [click](http://evil) | *x* `y`')
    '&lt;img src=x onerror=alert(1)&gt; \\\\[click\\\\](http://evil) \\\\| \\\\*x\\\\* \\\\`y\\\\`'
    >>> escape_markdown_text("# Title\\n- item")
    '\\\\# Title - item'
    """
    text = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = re.sub(r"([\\\\`*\[\]|!])", r"\\\1", text)  # not _: ids like S_001 stay as written
    text = " ".join(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    return _LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), text)
