"""An offline out-of-distribution set for MNIST: letters A–J rendered from fonts, notMNIST-style.

Laurent et al. (ICLR 2024, §4, Table 1, App. B.3; docs/science.md, § Prediction metrics) score OOD
detection on FashionMNIST's test set, which cannot be downloaded here. This stands in for it: 5 000
images of the letters A–J, each from one of the DejaVu and Liberation fonts (:data:`FONT_FILES`) at a
random size, rotation and stroke width, then processed as MNIST's digits were: cropped, its longer side
scaled to at most 20 pixels with anti-aliasing, its brightest pixel set to 255, and placed in a 28 × 28
field by its centre of mass (at pixel (14, 14), as MNIST's are), give or take one pixel. Like MNIST, 0
is the background.

The set ships in ``assets/ood/glyphs.npz`` (data only: three uint8 arrays, read with
``allow_pickle=False``) and is checked against the SHA-256 of its content (each array's name, dtype,
shape and bytes; not of the zip file, whose entries carry timestamps). ``python -m symlab.lib.glyphs
--build`` renders it again (this needs the fonts and Pillow; loading needs neither).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from symlab.lib.shipped import shipped

SHIPPED_FILE = shipped("ood", "glyphs.npz")
GLYPHS_SHA256 = "053202f498a4d1ce31a075f7ccc5638dfe639891f10a407488273c6104c7089a"
COUNT, SEED = 5000, 0
LETTERS = "ABCDEFGHIJ"
SIDE, BOX = 28, 20  # MNIST: a 20 × 20 box, centred by mass in 28 × 28
FONT_DIR = Path("/usr/share/fonts/truetype")
# Debian's fonts-dejavu-core, fonts-dejavu-extra and fonts-liberation (1.07); DejaVu Math TeX Gyre left out.
FONT_FILES = (
    tuple(
        f"dejavu/DejaVu{family}{style}.ttf"
        for family in ("Sans", "SansCondensed", "Serif", "SerifCondensed", "SansMono")
        for style in (
            "",
            "-Bold",
            "-Oblique" if "Sans" in family else "-Italic",
            "-BoldOblique" if "Sans" in family else "-BoldItalic",
        )
    )
    + ("dejavu/DejaVuSans-ExtraLight.ttf",)
    + tuple(
        f"liberation/Liberation{family}-{style}.ttf"
        for family in ("Sans", "SansNarrow", "Serif", "Mono")
        for style in ("Regular", "Bold", "Italic", "BoldItalic")
    )
)
FONTS_HINT = "apt-get install fonts-dejavu-core fonts-dejavu-extra fonts-liberation"
RENDER_PX = 96  # font size of the first rendering, scaled down to at most BOX pixels
SIZES = (14, BOX)  # the longer side after scaling, uniform in this closed range
MAX_ANGLE = 15.0  # degrees, uniform in ±
MAX_STROKE = 5  # extra stroke width at RENDER_PX, uniform in 0..MAX_STROKE
ARRAYS = ("images", "letters", "fonts")  # the file's: pixels, index in LETTERS, index in FONT_FILES


class GlyphsDataError(RuntimeError):
    """The glyph set is missing or damaged; the message says how to restore or rebuild it."""


@dataclass(frozen=True)
class Glyphs:
    images: np.ndarray  # (n, 784) uint8, MNIST's layout (row-major 28 × 28)
    letters: np.ndarray  # (n,) uint8: LETTERS[i]
    fonts: np.ndarray  # (n,) uint8: FONT_FILES[i]


def _fix_hint(path: Path) -> str:
    rebuild = (
        "`python -m symlab.lib.glyphs --build"
        + ("" if path == SHIPPED_FILE else f" --out {path}")
        + f"` (needs the fonts: {FONTS_HINT})"
    )
    if path == SHIPPED_FILE:
        return f"Restore the shipped copy with `git checkout -- assets/ood`, or rebuild it with {rebuild}."
    return f"Rebuild it with {rebuild}, or copy SymLab's `assets/ood/glyphs.npz`."


def content_sha256(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 of each array's name, dtype, shape and bytes, in name order."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}:{array.dtype.str}:{array.shape};".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def load_glyphs(path: str | os.PathLike | None = None) -> Glyphs:
    """The glyph set from ``path`` (default: the shipped copy), verified against :data:`GLYPHS_SHA256`."""
    path = SHIPPED_FILE if path is None else Path(path).expanduser().resolve()
    if not path.is_file():
        raise GlyphsDataError(f"The glyph set {path} is missing. {_fix_hint(path)}")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as error:
        raise GlyphsDataError(
            f"The glyph set {path} is not a readable .npz file ({error}). {_fix_hint(path)}"
        ) from None
    digest = content_sha256(arrays)
    if digest != GLYPHS_SHA256:
        raise GlyphsDataError(
            f"The glyph set {path} has the wrong content (SHA-256 {digest}, arrays "
            f"{sorted(arrays)}; expected {GLYPHS_SHA256}). {_fix_hint(path)}"
        )
    return Glyphs(
        images=arrays["images"].reshape(len(arrays["images"]), SIDE * SIDE),
        letters=arrays["letters"],
        fonts=arrays["fonts"],
    )


@functools.lru_cache(maxsize=2)
def load_glyphs_once(path: str | None = None) -> Glyphs:
    """:func:`load_glyphs`, read once per process. The arrays are shared: treat them as read-only."""
    return load_glyphs(path)


def render_glyphs(count: int = COUNT, seed: int = SEED, font_dir: Path = FONT_DIR) -> dict[str, np.ndarray]:
    """``count`` letter images from a seeded generator: ``{"images": (count, 28, 28) uint8, "letters",
    "fonts"}``. The same seed, fonts and Pillow give the same arrays; a smaller count, their first rows."""
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive integer, got {count!r}")
    from PIL import ImageFont  # the build alone needs Pillow (FreeType): loading reads only numpy arrays

    missing = [name for name in FONT_FILES if not (font_dir / name).is_file()]
    if missing:
        raise GlyphsDataError(
            f"Building the glyph set needs {len(missing)} font files missing from {font_dir} "
            f"({', '.join(missing[:3])}…): {FONTS_HINT}"
        )
    fonts = [ImageFont.truetype(str(font_dir / name), RENDER_PX) for name in FONT_FILES]
    rng = np.random.default_rng(seed)
    images, letters, font_index = [], [], []
    for _ in range(count):  # each image's draws in turn: a smaller count gives a prefix of the set
        letters.append(int(rng.integers(len(LETTERS))))
        font_index.append(int(rng.integers(len(FONT_FILES))))
        images.append(_render_one(LETTERS[letters[-1]], fonts[font_index[-1]], rng))
    return {
        "images": np.stack(images),
        "letters": np.array(letters, dtype=np.uint8),
        "fonts": np.array(font_index, dtype=np.uint8),
    }


def _render_one(letter: str, font, rng: np.random.Generator) -> np.ndarray:
    """One letter, drawn large, turned, cropped, scaled into the 20-pixel box, centred by mass."""
    from PIL import Image, ImageDraw

    size, angle = int(rng.integers(SIZES[0], SIZES[1] + 1)), rng.uniform(-MAX_ANGLE, MAX_ANGLE)
    stroke, shift = int(rng.integers(MAX_STROKE + 1)), rng.integers(-1, 2, size=2)
    canvas = Image.new("L", (3 * RENDER_PX, 3 * RENDER_PX), 0)
    ImageDraw.Draw(canvas).text(
        (1.5 * RENDER_PX, 1.5 * RENDER_PX),
        letter,
        fill=255,
        font=font,
        anchor="mm",
        stroke_width=stroke,
        stroke_fill=255,
    )
    canvas = canvas.rotate(angle, resample=Image.Resampling.BICUBIC)
    glyph = canvas.crop(canvas.getbbox())
    scale = size / max(glyph.size)
    glyph = glyph.resize(
        (max(1, round(glyph.width * scale)), max(1, round(glyph.height * scale))), Image.Resampling.LANCZOS
    )
    pixels = np.asarray(glyph, dtype=np.float64)
    pixels = np.round(255 * pixels / pixels.max()).astype(np.uint8)
    return _centre_by_mass(pixels, shift)


def _centre_by_mass(pixels: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """``pixels`` in a 28 × 28 field with its centre of mass at (14, 14) + ``shift``, kept whole."""
    height, width = pixels.shape
    mass = pixels.sum()
    centre = np.array([(pixels.sum(1) * np.arange(height)).sum(), (pixels.sum(0) * np.arange(width)).sum()]) / mass
    top, left = np.clip(np.round(SIDE / 2 - centre).astype(int) + shift, 0, [SIDE - height, SIDE - width])
    field = np.zeros((SIDE, SIDE), dtype=np.uint8)
    field[top : top + height, left : left + width] = pixels
    return field


def build(path: str | os.PathLike = SHIPPED_FILE, count: int = COUNT, seed: int = SEED) -> str:
    """Render the set and write it to ``path`` (np.savez_compressed); returns its content SHA-256."""
    arrays = render_glyphs(count, seed)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, allow_pickle=False, **arrays)
    return content_sha256(arrays)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m symlab.lib.glyphs", description=__doc__.split("\n")[0])
    parser.add_argument("--build", action="store_true", help=f"render the {COUNT} images (seed {SEED}) again")
    parser.add_argument("--out", type=Path, default=SHIPPED_FILE, help="where to write (default: %(default)s)")
    args = parser.parse_args(argv)
    if not args.build:
        parser.error("nothing to do: pass --build")
    digest = build(args.out)
    print(
        f"wrote {args.out} ({args.out.stat().st_size} bytes) from {len(FONT_FILES)} fonts in {FONT_DIR}; "
        f"content SHA-256 {digest}"
    )
    if digest != GLYPHS_SHA256:
        print(
            f"It differs from GLYPHS_SHA256 in {Path(__file__).name} ({GLYPHS_SHA256}): another Pillow or "
            f'FreeType renders differently. Set GLYPHS_SHA256 = "{digest}" to load this file.'
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
