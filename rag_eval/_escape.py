"""Every name a user gives (query, run, stage, system, metric, folder) escaped for the medium it lands in: one function
per medium, used by every writer of that medium (docs/bad-input/ids-and-joins.md, "Names escaped for their medium").

- :func:`visible`: terminal text. Control characters (C0, DEL, C1), line and paragraph separators, bidirectional
  overrides and lone surrogates as Python's escapes (``\\x1b``, ``\\r``, ``\\u202e``); the rest as it is.
- :func:`markdown_cell`: one line of Markdown text (a table cell, a heading's or a paragraph's text).
- :func:`markdown_code`: a fenced code block no line of its text can close.
- :func:`xml_text`: text for XML 1.0 (JUnit): the characters XML cannot hold, which escaping cannot fix, made
  visible; ``&``, ``<``, ``>`` and quotes are the XML writer's (``xml.etree``).
- :func:`plot_text`: a matplotlib label, title or tick: ``$`` never starts math, a leading ``_`` never hides a
  legend entry, control characters visible, long names shortened.
- :func:`spreadsheet_cell`: a cell of a CSV written for a spreadsheet (``Pool.to_csv``), never read back: one
  starting ``=``, ``+``, ``-``, ``@``, a tab or a carriage return behind a ``'`` (OWASP's CSV injection advice).

Every other CSV (summary.csv, per_query.csv, tuning.csv, ``--format csv``) is data that rag_eval and pandas read
back: written by :func:`csv_text` (pandas' ``to_csv``, every field holding a delimiter, a quote or a line break
quoted), each value kept as it is (a formula prefix would change the id). HTML is jinja2's autoescape, its data JSON
read into JavaScript ``Map``\\s (``report.html.j2``); JSON is ``json.dumps``'s.
"""

from __future__ import annotations

import csv
import html
import re
from typing import Any

__all__ = ["csv_text", "markdown_cell", "markdown_code", "plot_text", "spreadsheet_cell", "visible", "xml_text"]

# what a terminal, a Markdown line or a plot must not get raw: C0 and C1 controls, DEL, the line and paragraph
# separators, the bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069), lone surrogates
_UNSEEN = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(value: object, *, keep: str = "") -> str:
    """``value`` as text for a terminal: every character of :data:`_UNSEEN` but those in ``keep`` (e.g. ``"\\n"``
    for a whole text of several lines) as its Python escape."""
    text = str(value)
    if keep:
        return _UNSEEN.sub(lambda m: m.group() if m.group() in keep else _escaped(m), text)
    return _UNSEEN.sub(_escaped, text)


# ----- Markdown (CommonMark and GitHub's) ---------------------------------------------------------------------

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# backslashed everywhere: what opens code, emphasis, links, strikethrough, GitHub's math and table cells
_INLINE = re.compile(r"[\\`*\[\]|~$]|(?<![^\W_])_|_(?![^\W_])")
# what makes a line a block when it starts one: a heading, a list item, a setext underline, a numbered item
_BLOCK_START = re.compile(r" {0,3}(?=#{1,6}(?: |$)|[-+](?: |$)|[=-]+ *$|\d{1,9}[.)](?: |$))")


def markdown_cell(value: object) -> str:
    """One line of Markdown text that renders as ``value``: a float to 4 decimals; ``&``, ``<``, ``>`` as entities
    (Markdown renders raw HTML), a line break (``\\r``, ``\\n``) as a space, other control characters visible,
    Markdown's punctuation backslashed (``|``, backticks, ``*``, ``_`` outside a word, ``[``, ``]``, ``~``, ``$``,
    ``\\``), and a leading ``#``, ``-``, ``+``, ``=`` or ``1.`` that would start a block backslashed too."""
    text = f"{value:.4f}" if isinstance(value, float) else str(value)
    text = visible(_LINE_BREAK.sub(" ", text))
    text = _INLINE.sub(lambda m: "\\" + m.group(), html.escape(text, quote=False))
    block = _BLOCK_START.match(text)
    if block:  # the backslash before the marker: before the ``.`` of ``1.``, else before its first character
        at = block.end() + len(re.match(r"\d*", text[block.end() :]).group())  # type: ignore[union-attr]
        text = text[:at] + "\\" + text[at:]
    return text


def markdown_code(text: str, info: str = "") -> str:
    """``text`` as a fenced code block whose fence is longer than any run of backticks in it (CommonMark: no line
    inside can close it), ending with a newline."""
    runs = [len(r) for r in re.findall("`+", text)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}{info}\n{text}\n{fence}\n"


# ----- XML 1.0 (JUnit) ----------------------------------------------------------------------------------------

# XML 1.0's Char production leaves out the C0 controls but tab, newline and carriage return, U+FFFE, U+FFFF and the
# surrogates; a carriage return is read back as a newline (end-of-line handling), so it is shown too
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0d\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def xml_text(value: object) -> str:
    """``value`` as text an XML 1.0 document can hold and read back as written: the characters it cannot hold (and
    the carriage return, which it reads as a newline) as their Python escapes; tab and newline kept."""
    return _NOT_XML.sub(_escaped, str(value))


# ----- matplotlib -------------------------------------------------------------------------------------------

#: a plot's label is cut to this many characters (with an ellipsis): a 500-character name does not fill the figure
PLOT_LABEL_MAX = 60


def plot_text(value: object, *, limit: int = PLOT_LABEL_MAX) -> str:
    """``value`` as matplotlib text shows it: ``$`` backslashed (an even number of them would typeset math), a
    leading ``_`` behind a zero-width space (matplotlib leaves a legend entry starting with ``_`` out), control
    characters visible, cut to ``limit`` characters (an ellipsis last)."""
    text = visible(value)
    if len(text) > limit:
        text = text[: limit - 1] + "\u2026"
    if text.startswith("_"):
        text = "\u200b" + text
    return text.replace("$", "\\$")


# ----- CSV -----------------------------------------------------------------------------------------------------


def csv_text(frame: Any, **options: Any) -> str:
    """``frame.to_csv(index=False, **options)`` with every field that needs quotes quoted: the csv module quotes a
    field holding a delimiter, a quote or ``\\n``, but not one holding a lone ``\\r`` when lines end with ``\\n``
    (Python 3.11), which a reader then splits; where the text holds a ``\\r``, every field is quoted."""
    text: str = frame.to_csv(index=False, **options)
    if "\r" in text:
        text = frame.to_csv(index=False, quoting=csv.QUOTE_ALL, **options)
    return text


# ----- CSV for a spreadsheet ----------------------------------------------------------------------------------

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(value: object) -> str:
    """``value`` as a CSV cell a spreadsheet shows as text, never runs: one starting ``=``, ``+``, ``-``, ``@``, a
    tab or a carriage return behind a ``'`` (the csv module then quotes what needs quoting)."""
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text
