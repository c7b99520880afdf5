from django import forms

from .models import Membership, Scale

# The project settings the form edits, with the same names as the model and the services' arguments.
PROJECT_FIELDS = (
    "name",
    "description",
    "labels_per_image",
    "allow_adjacent_pairs",
    "offer_uncertain",
    "skip_reasons",
    "instructions",
)


class ProjectForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    scale = forms.ModelChoiceField(queryset=Scale.objects.none(), empty_label=None)
    labels_per_image = forms.IntegerField(min_value=1, max_value=50, initial=4)
    allow_adjacent_pairs = forms.BooleanField(
        required=False, initial=True, label="Labelers may choose two adjacent tones"
    )
    offer_uncertain = forms.BooleanField(required=False, initial=True, label="Offer “uncertain”")
    skip_reasons = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        initial="no skin visible\nimage unusable\nother",
        help_text="One reason per line.",
    )
    instructions = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}),
        required=False,
        help_text="Rich text (HTML: paragraphs, lists, emphasis, links). Scripts and styles are removed.",
    )
    custom_tones = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        required=False,
        label="Custom scale tones",
        help_text="Only for a custom scale: one tone per line, lightest first, as “name, #hexcolour”.",
    )

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        from django.db.models import Q

        qs = (
            Scale.objects.filter(Q(is_builtin=True) | Q(created_by=user))
            if user
            else Scale.objects.filter(is_builtin=True)
        )
        self.fields["scale"].queryset = qs
        self.fields["scale"].required = False
        self.fields["scale"].empty_label = "Custom scale (define tones below)"
        if not self.initial.get("scale"):
            # Monk Skin Tone is the default (README): a new project needs only a name.
            from .services.projects import default_scale

            self.fields["scale"].initial = default_scale().pk

    def clean_skip_reasons(self):
        return [line.strip() for line in self.cleaned_data["skip_reasons"].splitlines() if line.strip()]

    def clean(self):
        data = super().clean()
        if not data.get("scale"):
            tones = []
            for n, line in enumerate((data.get("custom_tones") or "").splitlines(), start=1):
                if not line.strip():
                    continue
                name, _, colour = line.rpartition(",")
                if not name.strip() or not colour.strip().startswith("#"):
                    self.add_error("custom_tones", f"Line {n}: write “name, #hexcolour”.")
                    continue
                tones.append({"name": name.strip(), "hex_colour": colour.strip()})
            if len(tones) < 2 and not self.errors.get("custom_tones"):
                self.add_error("custom_tones", "A custom scale needs at least two tones.")
            data["tones"] = tones
        return data


class MemberForm(forms.Form):
    username = forms.CharField(max_length=150)
    password = forms.CharField(
        widget=forms.PasswordInput, required=False, help_text="For a new person (at least 8 characters)."
    )
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.LABELER)
    pseudonym = forms.CharField(max_length=40, required=False, help_text="Left empty: L01, L02, ...")
    expertise = forms.CharField(max_length=200, required=False)
    region_of_upbringing = forms.CharField(max_length=200, required=False)
    gender = forms.CharField(max_length=100, required=False)
    share_profile = forms.BooleanField(
        required=False,
        label="Agreed to share the profile in releases",
        help_text="Only with the person's agreement: their profile then appears next to their id in released "
        "datasets. Otherwise releases carry team-level summaries only.",
    )


class CalibrationForm(forms.Form):
    size = forms.IntegerField(
        min_value=1, initial=59, help_text="Images set aside for both calibrations (seed 000: 59)."
    )
    calibration_1_size = forms.IntegerField(min_value=1, required=False, help_text="Default: half, rounded up.")
    n_repeated = forms.IntegerField(
        min_value=0,
        required=False,
        initial=30,
        help_text="Calibration-1 images shown again in calibration 2 to measure consistency (seed 000: 30).",
    )
    seed = forms.IntegerField(min_value=0, required=False, help_text="Left empty: a new random seed, recorded.")
    image_ids = forms.CharField(required=False, help_text="Or pick by hand: image ids separated by commas.")

    def clean_image_ids(self):
        raw = self.cleaned_data["image_ids"].replace(" ", "")
        if not raw:
            return None
        try:
            return [int(x) for x in raw.split(",") if x]
        except ValueError:
            raise forms.ValidationError("Ids are whole numbers separated by commas.") from None
