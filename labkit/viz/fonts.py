"""Chinese-capable matplotlib fonts, configured once for every notebook.

matplotlib's default DejaVu Sans has no CJK glyphs: Chinese labels render as
boxes with "Glyph missing" warnings.  `make setup` installs WenQuanYi Micro Hei
(Debian `fonts-wqy-microhei`, also in binder/apt.txt); this module finds it (or
another CJK font) and puts it first in the sans-serif list.
"""

from __future__ import annotations

import warnings

from labkit.i18n import _

# Preferred families, best first; any of them has full GB2312 coverage.
CJK_FAMILIES = [
    "WenQuanYi Micro Hei",
    "Noto Sans CJK SC",
    "Noto Sans SC",
    "Source Han Sans SC",
    "SimHei",
    "Microsoft YaHei",
    "PingFang SC",
    "Heiti SC",
]

_configured: str | None = None


def find_cjk_font() -> str | None:
    """The first installed CJK family, or None."""
    from matplotlib import font_manager

    installed = {f.name for f in font_manager.fontManager.ttflist}
    for fam in CJK_FAMILIES:
        if fam in installed:
            return fam
    return None


def configure(strict: bool = False) -> str | None:
    """Put a CJK font first for matplotlib; returns its family name.

    strict=True raises when none is installed (used by `labkit doctor env`).
    """
    global _configured
    if _configured:
        return _configured
    import matplotlib

    fam = find_cjk_font()
    if fam is None:
        msg = _(
            "no CJK font found: Chinese plot labels will render as boxes. "
            "Fix: apt-get install fonts-wqy-microhei (or run `make setup`)."
        )
        if strict:
            raise RuntimeError(msg)
        warnings.warn(msg, stacklevel=2)
        return None
    matplotlib.rcParams["font.sans-serif"] = [fam] + [f for f in matplotlib.rcParams["font.sans-serif"] if f != fam]
    matplotlib.rcParams["font.family"] = "sans-serif"
    matplotlib.rcParams["axes.unicode_minus"] = False  # the CJK font lacks U+2212
    _configured = fam
    return fam


def glyph_fonts(text: str) -> dict[str, str | None]:
    """The family that draws each distinct non-ASCII character of `text` with matplotlib's current settings
    (its per-glyph fallback: the first font of the chain that has the glyph), None where no font has it
    (a tofu box). What a plot's labels were actually drawn with, not what was asked for."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    paths = font_manager.fontManager._find_fonts_by_props(font_manager.FontProperties())
    fonts = [FT2Font(p) for p in paths]
    out: dict[str, str | None] = {}
    for ch in dict.fromkeys(c for c in text if ord(c) > 127 and not c.isspace()):
        out[ch] = next((f.family_name for f in fonts if f.get_char_index(ord(ch))), None)
    return out
