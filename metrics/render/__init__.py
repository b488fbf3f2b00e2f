"""Rendering: text, Markdown and HTML reports, charts, SVG."""
