"""mkdocs hooks for the docs site (mkdocs.yml, ``hooks:``).

breakeven's docstrings cross-reference with Sphinx roles (``:func:`~breakeven.model.speedup```),
which mkdocstrings renders as the role's text before a code span.  The API page shows the name
alone: ``~a.b.c`` as ``c``, ``a.b.c`` whole, as Sphinx would.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:class|func|data|mod|meth|attr|obj|exc):<code>(~?)([^<]+)</code>")


def _name(match: re.Match[str]) -> str:
    short, target = match.groups()
    return f"<code>{target.rsplit('.', 1)[-1] if short else target}</code>"


def on_page_content(html: str, **kwargs: Any) -> str:
    """Sphinx roles in rendered docstrings, as code spans of the name they point to."""
    return _ROLE.sub(_name, html)
