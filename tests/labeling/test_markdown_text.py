"""People's text in the Markdown files the app writes (issue 26: lead-written card fields and the erasure
notice went into data_card.md raw, HTML and Markdown structure passing through)."""

from types import SimpleNamespace

import pytest

from labeling.services import erasure_notice
from labeling.services.markdown_text import escape_markdown_text
from labeling.services.releases import card

HOSTILE = "<script>alert(1)</script>\n# Heading\n- item\n[x](javascript:alert(1)) ![i](http://t/p.png) | a | b |"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<b>x</b> & y", "&lt;b&gt;x&lt;/b&gt; &amp; y"),
        ("[a](http://evil)", "\\[a\\](http://evil)"),
        ("![i](http://t/p.png)", "\\!\\[i\\](http://t/p.png)"),
        ("| a | b |", "\\| a \\| b \\|"),
        ("# not a heading", "\\# not a heading"),
        ("> not a quote", "&gt; not a quote"),
        ("1. not a list", "\\1. not a list"),
        ("S_001 stays, as does plain text.", "S_001 stays, as does plain text."),
        ("two\nlines\r\nthree", "two lines three"),
    ],
)
def test_structure_is_neutralised_and_words_kept(text, expected):
    assert escape_markdown_text(text) == expected


def test_a_leads_card_field_cannot_inject_html_or_markdown_structure():
    markdown = card._markdown([("user", HOSTILE)])
    assert "<script>" not in markdown and "&lt;script&gt;" in markdown
    assert "\n# Heading" not in markdown and "\\# Heading" in markdown
    assert "\n- item" not in markdown and "](javascript" in markdown and "\\[x\\]" in markdown
    assert "\\!\\[i\\]" in markdown and "\\| a \\| b \\|" in markdown


def test_an_erasure_notice_with_a_hostile_subject_id_stays_text():
    release = SimpleNamespace(version=3, published_at=None)
    notice = "Subject <img src=x onerror=alert(1)> [x](http://evil) was erased"
    block = erasure_notice._card_block_markdown(release, [notice], "https://example.org/original")
    assert "<img" not in block and "&lt;img src=x onerror=alert(1)&gt;" in block and "\\[x\\]" in block
    extra = erasure_notice.notice_file(release, [notice], "https://example.org/original").decode()
    assert "<img" not in extra and "\\[x\\]" in extra
