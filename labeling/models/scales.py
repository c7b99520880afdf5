from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

hex_colour = RegexValidator(r"^#[0-9a-fA-F]{6}$", "Use a colour like #a07e56.")


class Scale(models.Model):
    """An ordered set of tones. Built-in scales are shared; custom ones belong to their creator."""

    class Kind(models.TextChoices):
        MONK = "monk", "Monk Skin Tone (10 tones)"
        FITZPATRICK = "fitzpatrick", "Fitzpatrick I-VI"
        FIVE_TONE = "five_tone", "5 tones: light ... deep"
        CUSTOM = "custom", "Custom"

    name = models.CharField(max_length=120)
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.CUSTOM)
    description = models.TextField(blank=True)
    citation = models.CharField(max_length=300, blank=True)
    is_builtin = models.BooleanField(default=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind"],
                condition=models.Q(is_builtin=True),
                name="one_builtin_scale_per_kind",
            )
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def n_tones(self) -> int:
        return self.tones.count()


class Tone(models.Model):
    """One tone of a scale. ``position`` is its ordinal value, 1 = lightest."""

    scale = models.ForeignKey(Scale, related_name="tones", on_delete=models.CASCADE)
    position = models.PositiveSmallIntegerField()
    code = models.CharField(max_length=20, help_text="Short label, e.g. '6' or 'IV'.")
    name = models.CharField(max_length=80)
    hex_colour = models.CharField(max_length=7, validators=[hex_colour])

    class Meta:
        ordering = ["scale_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["scale", "position"], name="unique_tone_position"),
            models.CheckConstraint(condition=models.Q(position__gte=1), name="tone_position_gte_1"),
        ]

    def __str__(self) -> str:
        return f"{self.scale.name} {self.code} {self.name}"
