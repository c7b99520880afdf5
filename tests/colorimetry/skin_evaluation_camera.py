"""A second recolouring model that does NOT keep the grey-level face identical across tones (issue 21).

Why a second model
------------------
``skin_evaluation_set.recoloured`` multiplies each linear channel of the head's skin (with lips, brows
and eyelids) by ``swatch / median skin``. Every pixel of the face is then scaled by the same factor
per channel, so the face's grey image is the light-skinned original times a constant: after histogram
equalisation, or in log luminance, a Viola-Jones cascade sees the same face at every Monk tone. That
set cannot show the failure a face detector is documented to have on real darker faces.

This model was written down and committed *before* any detector was run on it (the commit that adds
this file changes nothing else). It keeps the same two public-domain portraits (scikit-image's
astronaut, Matplotlib's Grace Hopper) and the same truth (the face's median per-pixel ITA as recorded
in the final picture, over the same face-skin mask), and changes what a gain keeps constant, with
three effects of a real photo of darker skin:

1. **Specular reflection does not follow the pigment.** The surface reflection of skin (a few percent,
   Fresnel) is achromatic and does not depend on melanin; only the diffuse, subsurface part does. The
   original skin's relative luminance ``S = Y / median(Y)`` (median over the face-skin truth) is split
   at :data:`SPECULAR_KNEE`: ``min(S, knee)`` is diffuse shading and is multiplied by the swatch's linear
   colour; the excess ``max(S - knee, 0)`` is specular and is added as grey at the *original* absolute
   intensity (``excess x median(Y)`` of the light original), whatever the tone. On Monk 1 this is
   nearly the original; on Monk 10 the forehead, nose and cheekbone highlights stand out of a dark face,
   as in flash photos: the grey-level pattern changes with the tone.
2. **Brows, lashes and lip edges keep their own pigment.** Pixels of the recoloured head region whose
   original colour is far from the skin's (CIELAB distance above :data:`FEATURE_DISTANCE` x the
   portrait's skin tolerance) are not scaled with the skin. They keep their original colour, but no
   feature pixel is left lighter than :data:`FEATURE_MAX_RATIO` of the recoloured skin's median
   luminance (it is then scaled down, hue kept): dark brows on a dark face have little contrast left,
   while a gain kept the brow-to-skin ratio of the light original at every tone. Eyes' whites and
   teeth keep their colour, as in the first model.
3. **A camera's noise and JPEG.** After the scene's variant (exposure, cast, crop, distractors),
   sensor noise is added in linear light with a shot-noise part and a constant read-noise part
   (variance ``Y / FULL_WELL + READ_NOISE**2`` per channel, seeded per case: dark skin gets a lower
   signal-to-noise ratio, about 6 at Monk 10 against about 60 at Monk 1), then the picture is stored as
   a JPEG at quality :data:`JPEG_QUALITY` with Pillow's default 4:2:0 chroma subsampling and decoded
   again, as a lead's photos arrive.

Conditions (:data:`CAMERA_VARIANTS`, the ones the issue's reporter tried on a new recolouring): normal
exposure, half a stop under, a warm mirrored crop, and beside a patch of another Monk tone; on both
portraits, ten tones each: 80 cases.
"""

from __future__ import annotations

import functools
import io

import numpy as np

from colorimetry.color import _LINEAR_F64, srgb_to_lab

from . import skin_evaluation_set as first

#: Relative luminance above which the original skin's brightness counts as specular.
SPECULAR_KNEE = 1.25
#: Pixels of the head region this many skin tolerances or more from the skin colour are features.
FEATURE_DISTANCE = 1.6
#: A feature pixel is never lighter than this fraction of the recoloured skin's median luminance.
FEATURE_MAX_RATIO = 0.8
#: Shot noise: a linear value of 1.0 collects this many electrons (variance Y / FULL_WELL).
FULL_WELL = 4000.0
#: Read noise, in linear units of the white.
READ_NOISE = 0.002
#: JPEG quality the picture is stored at.
JPEG_QUALITY = 85

_Y_WEIGHTS = np.array([0.212671, 0.715160, 0.072169])


@functools.cache
def _features(portrait_name: str) -> np.ndarray:
    """The recoloured region's pixels whose colour is far from the skin's: brows, lashes, lip edges."""
    portrait = _portrait(portrait_name)
    lab = srgb_to_lab(portrait.rgb).astype(np.float64)
    median = np.median(lab[portrait.truth], axis=0)
    distance = np.sqrt(((lab - median) ** 2).sum(axis=-1))
    return portrait.recolour & (distance >= FEATURE_DISTANCE * _TOLERANCE)


#: The skin tolerance both portraits were built with (``skin_evaluation_set._portrait``).
_TOLERANCE = 14.0


def _portrait(name: str) -> first.Portrait:
    return {"astronaut": first.astronaut, "grace_hopper": first.grace_hopper}[name]()


def recoloured_camera(portrait: first.Portrait, tone: int) -> np.ndarray:
    """The portrait's skin recoloured to ``tone`` with specular highlights and features kept (effects 1, 2)."""
    linear = _LINEAR_F64[portrait.rgb]
    luminance = linear @ _Y_WEIGHTS
    skin_median_y = float(np.median(luminance[portrait.truth]))
    swatch = _LINEAR_F64[first.swatch_rgb(tone)]
    features = _features(portrait.name)
    skin = portrait.recolour & ~features
    out = linear.copy()
    relative = luminance[skin] / skin_median_y
    # The diffuse part keeps the original's chromaticity deviations around the skin median, scaled
    # to the swatch as in the first model; the specular excess is added as grey.
    chroma = linear[skin] / np.maximum(luminance[skin], 1e-6)[:, None]
    median_chroma = np.median(linear[portrait.truth] / np.maximum(luminance[portrait.truth], 1e-6)[:, None], axis=0)
    swatch_y = float(swatch @ _Y_WEIGHTS)
    swatch_chroma = swatch / swatch_y
    diffuse = np.minimum(relative, SPECULAR_KNEE)
    specular = np.maximum(relative - SPECULAR_KNEE, 0.0) * skin_median_y
    out[skin] = (chroma / median_chroma * swatch_chroma) * (diffuse * swatch_y)[:, None] + specular[:, None]
    # Features: their own colour, never lighter than FEATURE_MAX_RATIO of the new skin's median luminance.
    ceiling = FEATURE_MAX_RATIO * swatch_y
    feature_y = luminance[features]
    scale = np.minimum(1.0, ceiling / np.maximum(feature_y, 1e-6))
    out[features] = linear[features] * scale[:, None]
    return first._to_uint8(out)


def camera(rgb: np.ndarray, seed: int) -> np.ndarray:
    """Sensor noise in linear light, then a JPEG round trip (effect 3)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    linear = _LINEAR_F64[rgb]
    sigma = np.sqrt(np.clip(linear, 0.0, None) / FULL_WELL + READ_NOISE**2)
    noisy = first._to_uint8(linear + rng.standard_normal(linear.shape) * sigma)
    buffer = io.BytesIO()
    Image.fromarray(noisy).save(buffer, format="JPEG", quality=JPEG_QUALITY)
    buffer.seek(0)
    with Image.open(buffer) as image:
        return np.asarray(image.convert("RGB")).copy()


CAMERA_VARIANTS: dict[str, first.Variant] = {
    "plain": first.chain(),
    "under_half_stop": first.exposure(-0.5),
    "warm_mirror_crop": first.chain(first.white_balance(first.WARM), first.mirror, first.crop((0.1, 0.0, 0.9, 0.8))),
    "other_tone_patch": lambda rgb, truth, tone: first.other_tone(tone)(rgb, truth, tone),
}


def camera_cases(tones=range(1, 11)) -> list[first.Case]:
    """Every case of this model: both portraits x :data:`CAMERA_VARIANTS` x ``tones``."""
    out = []
    for p, portrait in enumerate((first.astronaut(), first.grace_hopper())):
        for tone in tones:
            scene = recoloured_camera(portrait, tone)
            for v, (name, variant) in enumerate(CAMERA_VARIANTS.items()):
                rgb, truth = variant(scene, portrait.truth, tone)
                rgb = camera(rgb, seed=1000 * p + 10 * tone + v)
                out.append(first.Case(f"{portrait.name}/camera_{name}", tone, rgb, first.truth_ita(rgb, truth)))
    return out
