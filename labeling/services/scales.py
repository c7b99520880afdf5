"""Built-in scales and custom-scale creation."""

from django.db import transaction

from ..models import Scale, Tone

# Official Monk Skin Tone swatches (published by Google; DOMAIN.md section 3) [Monk2019].
MONK_TONES = [
    ("1", "MST 1", "#f6ede4"),
    ("2", "MST 2", "#f3e7db"),
    ("3", "MST 3", "#f7ead0"),
    ("4", "MST 4", "#eadaba"),
    ("5", "MST 5", "#d7bd96"),
    ("6", "MST 6", "#a07e56"),
    ("7", "MST 7", "#825c43"),
    ("8", "MST 8", "#604134"),
    ("9", "MST 9", "#3a312a"),
    ("10", "MST 10", "#292420"),
]
# Fitzpatrick types have no official swatches; these are illustrative only.
FITZPATRICK_TONES = [
    ("I", "Type I", "#f4d0b1"),
    ("II", "Type II", "#e7b48f"),
    ("III", "Type III", "#d39e7c"),
    ("IV", "Type IV", "#bb7750"),
    ("V", "Type V", "#a55d2b"),
    ("VI", "Type VI", "#3c201d"),
]
# The 5-tone scale of the public data card quoted in DOMAIN.md section 2.
FIVE_TONES = [
    ("1", "light", "#f0e0cc"),
    ("2", "mid-light", "#d7bd96"),
    ("3", "medium", "#a07e56"),
    ("4", "mid-deep", "#6e4d3a"),
    ("5", "deep", "#3a312a"),
]

BUILTIN_SCALES = {
    Scale.Kind.MONK: (
        "Monk Skin Tone (MST)",
        "Ellis Monk's 10-tone scale; official swatch colours published by Google.",
        MONK_TONES,
    ),
    Scale.Kind.FITZPATRICK: (
        "Fitzpatrick I-VI",
        "Fitzpatrick (1988) [Fitzpatrick1988] phototypes. Swatch colours are illustrative, not official.",
        FITZPATRICK_TONES,
    ),
    Scale.Kind.FIVE_TONE: (
        "Five tones (light ... deep)",
        "The 5-tone scale of a public body-measurement fairness dataset card.",
        FIVE_TONES,
    ),
}


def scales_ensure_builtin(scale_model=Scale, tone_model=Tone) -> None:
    """Create the built-in scales if missing (also used by a data migration)."""
    for kind, (name, citation, tones) in BUILTIN_SCALES.items():
        scale, created = scale_model.objects.get_or_create(
            kind=kind, is_builtin=True, defaults={"name": name, "citation": citation}
        )
        if created:
            tone_model.objects.bulk_create(
                tone_model(scale=scale, position=i, code=code, name=tname, hex_colour=hexc)
                for i, (code, tname, hexc) in enumerate(tones, start=1)
            )


@transaction.atomic
def scale_create_custom(*, name: str, tones: list[dict], created_by=None) -> Scale:
    """Create a custom scale from ordered tones ``[{"name", "hex_colour", "code"?}]`` (lightest first)."""
    from django.core.exceptions import ValidationError

    if not 2 <= len(tones) <= 30:
        raise ValidationError("A scale needs between 2 and 30 tones.")
    scale = Scale.objects.create(name=name, kind=Scale.Kind.CUSTOM, created_by=created_by)
    objs = []
    for i, tone in enumerate(tones, start=1):
        obj = Tone(
            scale=scale,
            position=i,
            code=str(tone.get("code") or i),
            name=str(tone.get("name") or "").strip() or f"Tone {i}",
            hex_colour=str(tone.get("hex_colour", "")).strip(),
        )
        obj.full_clean(exclude=["scale"])
        objs.append(obj)
    Tone.objects.bulk_create(objs)
    return scale
