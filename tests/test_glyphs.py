"""The offline OOD set (symlab.lib.glyphs): the shipped file, its checksum, and its rendering."""

import numpy as np
import pytest

from symlab.lib import glyphs, mnist_data


@pytest.fixture(scope="module")
def shipped():
    return glyphs.load_glyphs()


def test_shipped_set_loads_with_mnists_layout(shipped):
    assert shipped.images.shape == (glyphs.COUNT, 784) and shipped.images.dtype == np.uint8
    assert shipped.letters.shape == shipped.fonts.shape == (glyphs.COUNT,)
    assert set(np.unique(shipped.letters)) == set(range(len(glyphs.LETTERS)))
    assert shipped.fonts.max() < len(glyphs.FONT_FILES)
    images = shipped.images.reshape(-1, 28, 28)
    assert (images.max(axis=(1, 2)) == 255).all()  # each glyph's brightest pixel, as MNIST's strokes
    edges = np.concatenate([images[:, [0, -1]].ravel(), images[:, :, [0, -1]].ravel()])
    assert edges.max() == 0  # each glyph whole: its 20-pixel box, shifted by at most 1, stays in the field


def test_the_images_are_not_mnists_digits_but_look_like_them(shipped):
    mnist = mnist_data.load_mnist_once()
    glyph_mean = shipped.images.mean(axis=0) / 255
    test_mean, train_mean = mnist.test_images.mean(axis=0) / 255, mnist.train_images.mean(axis=0) / 255
    # MNIST's two halves have nearly one mean image; the letters' is far from it.
    assert np.linalg.norm(glyph_mean - test_mean) > 5 * np.linalg.norm(train_mean - test_mean)
    # ... with MNIST's ink: about as many bright pixels, centred by mass near pixel (14, 14).
    assert glyph_mean.mean() == pytest.approx(test_mean.mean(), rel=0.25)
    images = shipped.images.reshape(-1, 28, 28).astype(float)
    centre = (images.sum(axis=2) * np.arange(28)).sum(axis=1) / images.sum(axis=(1, 2))
    assert np.abs(centre - 14).max() <= 2.0


def test_a_corrupt_copy_is_refused_with_the_way_to_rebuild(tmp_path):
    content = glyphs.SHIPPED_FILE.read_bytes()
    damaged = bytearray(content)
    damaged[len(content) // 2] ^= 0xFF
    (tmp_path / "damaged.npz").write_bytes(bytes(damaged))
    with pytest.raises(glyphs.GlyphsDataError, match=r"not a readable \.npz.*python -m symlab\.lib\.glyphs --build"):
        glyphs.load_glyphs(tmp_path / "damaged.npz")
    # A well-formed file with one pixel changed passes the zip's checks, not the content's checksum.
    with np.load(glyphs.SHIPPED_FILE) as archive:
        arrays = {name: archive[name].copy() for name in archive.files}
    arrays["images"][0, 14, 14] ^= 1
    np.savez_compressed(tmp_path / "edited.npz", **arrays)
    with pytest.raises(glyphs.GlyphsDataError, match="wrong content"):
        glyphs.load_glyphs(tmp_path / "edited.npz")
    # An object array would need a pickle to load: refused, not run.
    np.savez(tmp_path / "pickled.npz", images=np.array([{"a": 1}], dtype=object))
    with pytest.raises(glyphs.GlyphsDataError, match="not a readable"):
        glyphs.load_glyphs(tmp_path / "pickled.npz")
    with pytest.raises(glyphs.GlyphsDataError, match="missing.*--build --out"):
        glyphs.load_glyphs(tmp_path / "absent.npz")


def test_the_checksum_covers_names_shapes_and_dtypes():
    image = np.zeros((2, 3), dtype=np.uint8)
    digests = {
        glyphs.content_sha256({"images": image}),
        glyphs.content_sha256({"other": image}),
        glyphs.content_sha256({"images": image.reshape(3, 2)}),
        glyphs.content_sha256({"images": image.astype(np.int8)}),
    }
    assert len(digests) == 4


def test_rendering_is_seeded_and_reproduces_the_shipped_images(shipped, fonts_installed):
    first, again = glyphs.render_glyphs(12, seed=0), glyphs.render_glyphs(12, seed=0)
    other = glyphs.render_glyphs(12, seed=1)
    assert all(np.array_equal(first[name], again[name]) for name in glyphs.ARRAYS)
    assert not np.array_equal(first["images"], other["images"])
    assert first["images"].shape == (12, 28, 28) and first["images"].dtype == np.uint8
    # A smaller count renders the shipped set's first images: this Pillow still draws what shipped.
    assert np.array_equal(first["images"].reshape(12, 784), shipped.images[:12])
    assert np.array_equal(first["letters"], shipped.letters[:12]) and np.array_equal(first["fonts"], shipped.fonts[:12])


def test_invalid_counts_are_refused():
    with pytest.raises(ValueError, match="count"):
        glyphs.render_glyphs(0)
