"""The pieces every page is made of: escaping, the page shell, links, and the shipped CSS and JS.

Every text from a record or the data goes through `esc`: answers and judge replies are model output, and
are shown, never interpreted. Links come from a `Links`: the server's are URLs, the export's are
anchors within its one file.
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Protocol
from urllib.parse import quote, urlencode

__all__ = ["ASSETS", "AnchorLinks", "Links", "UrlLinks", "asset", "esc", "page", "table"]

# The files served under /static/ and inlined in an export: by name, never by path.
ASSETS = {"viewer.css": "text/css", "viewer.js": "text/javascript"}


def asset(name: str) -> bytes:
    """A shipped asset's bytes; KeyError for any name not in ASSETS."""
    if name not in ASSETS:
        raise KeyError(name)
    return resources.files("ifsweep.runner.view").joinpath("assets", name).read_bytes()


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


class Links(Protocol):
    def home(self) -> str: ...

    def group(self, bench: str, model: str, query: Mapping[str, str] | None = None) -> str: ...

    def instance(
        self, bench: str, model: str, instance_id: str, query: Mapping[str, str] | None = None
    ) -> str:
        """ "" when the instance has no page here (an export holds only those it selected). `query`:
        the list's filters, which the page's previous and next links walk."""
        ...


def _seg(s: str) -> str:
    return quote(s, safe="")


@dataclass(frozen=True, slots=True)
class UrlLinks:
    """The server's pages: each name one percent-encoded path segment ("/" included)."""

    def home(self) -> str:
        return "/"

    def group(self, bench: str, model: str, query: Mapping[str, str] | None = None) -> str:
        url = f"/list/{_seg(bench)}/{_seg(model)}"
        return f"{url}?{urlencode(dict(query))}" if query else url

    def instance(
        self, bench: str, model: str, instance_id: str, query: Mapping[str, str] | None = None
    ) -> str:
        url = f"/instance/{_seg(bench)}/{_seg(model)}/{_seg(instance_id)}"
        return f"{url}?{urlencode(dict(query))}" if query else url


def anchor(*parts: str) -> str:
    """A stable HTML id for a tuple of names (any characters): a short hash of them."""
    return "a" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class AnchorLinks:
    """The export's sections, within one file. Filters have no page there: a group links to its list."""

    included: frozenset[tuple[str, str, str]] = field(default_factory=frozenset)
    groups: frozenset[tuple[str, str]] = field(default_factory=frozenset)

    def home(self) -> str:
        return "#overview"

    def group(self, bench: str, model: str, query: Mapping[str, str] | None = None) -> str:
        return "#" + anchor("g", bench, model) if (bench, model) in self.groups else ""

    def instance(
        self, bench: str, model: str, instance_id: str, query: Mapping[str, str] | None = None
    ) -> str:
        key = (bench, model, instance_id)
        return "#" + anchor("i", *key) if key in self.included else ""


def link(href: str, text: object, cls: str = "") -> str:
    """An anchor, or the bare text when there is nowhere to go."""
    c = f' class="{cls}"' if cls else ""
    return f'<a href="{esc(href)}"{c}>{esc(text)}</a>' if href else f"<span{c}>{esc(text)}</span>"


def table(head: Iterable[str], rows: Iterable[Iterable[str]], cls: str = "") -> str:
    """A table of cells that are already HTML (escape texts before)."""
    c = f' class="{cls}"' if cls else ""
    ths = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in r) + "</tr>" for r in rows)
    return f"<table{c}><thead><tr>{ths}</tr></thead><tbody>{body}</tbody></table>"


def page(title: str, body: str, *, inline: bool = False, refresh_s: int = 0, crumbs: str = "") -> str:
    """A whole page. `inline`: the CSS and JS inside it (the export, which must need nothing else)."""
    if inline:
        css = f"<style>{asset('viewer.css').decode()}</style>"
        js = f"<script>{asset('viewer.js').decode()}</script>"
    else:
        css = '<link rel="stylesheet" href="/static/viewer.css">'
        js = '<script src="/static/viewer.js" defer></script>'
    meta = f'<meta http-equiv="refresh" content="{refresh_s}">' if refresh_s else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"{meta}<title>{esc(title)}</title>{css}</head><body>"
        f'<header class="top"><span class="brand">ifsweep view</span>{crumbs}</header>'
        f"<main>{body}</main>{js}</body></html>"
    )


def crumbs(links: Links, run: str, *steps: tuple[str, str]) -> str:
    """The trail at the top: the run's overview, then each (href, text)."""
    parts = [link(links.home(), run)] + [link(href, text) for href, text in steps]
    return '<nav class="crumbs">' + " › ".join(parts) + "</nav>"


def usd(v: float) -> str:
    """Dollars: four decimals, or six for the fractions of a cent one call costs."""
    return f"${v:,.4f}" if v == 0 or abs(v) >= 0.01 else f"${v:.6f}"
