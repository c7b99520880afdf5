from django import forms

from ..models import Membership, Scale

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
            from ..services.projects import default_scale

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
    email = forms.EmailField(
        required=False,
        max_length=254,
        label="Email (recommended)",
        help_text="For a new person: with it they can reset a forgotten password themselves (and you can mail "
        "them a reset link from this page); you can add one later if it is left empty. They can change it on "
        "their account page.",
        error_messages={"invalid": "Give an email address such as name@example.org (or leave it empty)."},
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


class AccountEmailForm(forms.Form):
    """A person's own email address (empty: none), changed with their current password: a session left open
    elsewhere must not be enough to point the password reset at someone else's mailbox."""

    email = forms.EmailField(
        required=False,
        max_length=254,
        label="Email address",
        error_messages={"invalid": "Give an email address such as name@example.org (or leave it empty)."},
    )
    password = forms.CharField(widget=forms.PasswordInput, label="Current password", strip=False)

    def __init__(self, user, *args, **kwargs):
        self.user = user
        super().__init__(*args, **kwargs)

    def clean_password(self):
        password = self.cleaned_data["password"]
        if not self.user.check_password(password):
            self.wrong_password = True
            raise forms.ValidationError("That is not your current password.")
        return password


def split_ids(raw: str) -> list[str]:
    """Image ids pasted by a lead: separated by commas, semicolons, spaces or new lines."""
    import re

    return [token for token in re.split(r"[\s,;]+", raw or "") if token]


class CalibrationForm(forms.Form):
    """The calibration set: drawn at random or picked by hand, split into calibration 1 and 2.

    Defaults follow the project's size (``services.phases.calibration_defaults``); a choice that
    leaves too few images for the dashboard's statistics needs an explicit "choose it anyway".
    """

    method = forms.ChoiceField(
        choices=[("random", "Draw at random (the seed is recorded)"), ("manual", "Pick the images myself")],
        initial="random",
        widget=forms.RadioSelect,
        label="How",
        required=False,
    )
    size = forms.IntegerField(
        min_value=1,
        label="Calibration images",
        help_text="How many images both calibration rounds use together. The rest go to the main phase.",
    )
    calibration_1_size = forms.IntegerField(
        min_value=1,
        required=False,
        label="Images in calibration 1",
        help_text="Part of the calibration images labelled first; calibration 2 gets the others. Empty: half.",
    )
    n_repeated = forms.IntegerField(
        min_value=0,
        required=False,
        label="Calibration 1 images shown again in calibration 2",
        help_text="Labelled twice, weeks apart, to measure how consistent each labeler is (at least 5 to measure it).",
    )
    every_labeler = forms.BooleanField(
        required=False,
        label="Every labeler labels every calibration image",
        help_text="The design of the reference process. Otherwise each image gets the project's labels per image.",
    )
    seed = forms.IntegerField(
        min_value=0,
        max_value=2**62,
        required=False,
        label="Random seed",
        help_text="Empty: a new one, recorded so the same draw can be made again.",
    )
    external_ids = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "P_astro, P_bern, ..."}),
        label="Images picked by hand",
        help_text="Click images below, or paste their ids (as in your manifest), separated by commas or new lines.",
    )
    accept_too_few = forms.BooleanField(
        required=False, label="Choose it anyway: I know some statistics will show “too little data”."
    )

    def __init__(self, *args, n_images: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.n_images = n_images
        self.warnings: list[str] = []
        if self.data.get("method") == "manual":
            self.fields["size"].required = False

    def clean_external_ids(self):
        ids = split_ids(self.cleaned_data["external_ids"])
        if len(ids) > 100_000:
            raise forms.ValidationError("At most 100,000 images.")
        return ids

    def clean(self):
        from ..services.phases import calibration_warnings

        data = super().clean()
        if self.errors:
            return data
        if data.get("method") == "manual":
            if not data.get("external_ids"):
                self.add_error("external_ids", "Pick at least one image, or draw them at random.")
                return data
            size = len(dict.fromkeys(data["external_ids"]))
        else:
            data["method"] = "random"
            data["external_ids"] = None
            size = min(data["size"], self.n_images) if self.n_images else data["size"]
        n1 = data.get("calibration_1_size") or size - size // 2
        if n1 > size:
            self.add_error("calibration_1_size", f"Calibration 1 takes part of the {size} calibration images.")
            return data
        n_rep = data.get("n_repeated")
        n_rep = min(30, n1) if n_rep is None else n_rep
        if n_rep > n1:
            self.add_error("n_repeated", f"Calibration 2 can repeat at most the {n1} images of calibration 1.")
            return data
        self.warnings = calibration_warnings(size=size, calibration_1_size=n1, n_repeated=n_rep)
        if self.warnings and not data.get("accept_too_few"):
            raise forms.ValidationError(
                "This choice leaves too few images for some statistics: "
                + " ".join(self.warnings)
                + " Change the numbers, or tick “Choose it anyway”."
            )
        return data

    def service_arguments(self) -> dict:
        """The cleaned choice as ``calibration_configure``'s arguments."""
        d = self.cleaned_data
        args = {k: d.get(k) for k in ("calibration_1_size", "n_repeated", "seed")}
        args["every_labeler"] = bool(d.get("every_labeler"))
        if d.get("method") == "manual":
            args["external_ids"] = d["external_ids"]
        else:
            args["size"] = d["size"]
        return args


def _attribute_lines(text: str) -> dict:
    """``name: value`` lines (one per line; blank lines ignored) as attributes, numbers as numbers."""
    from ..services.imports import parse_cell

    attributes: dict = {}
    for number, line in enumerate((text or "").splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise forms.ValidationError(f"Line {number}: write “name: value”.")
        if name.strip() in attributes:
            raise forms.ValidationError(f"Line {number}: “{name.strip()}” is given twice.")
        parsed = parse_cell(value)
        if parsed is None:
            raise forms.ValidationError(f"Line {number}: “{name.strip()}” has no value (delete the line to remove it).")
        attributes[name.strip()] = parsed
    return attributes


def attribute_lines_text(attributes: dict | None) -> str:
    return "\n".join(f"{name}: {value}" for name, value in (attributes or {}).items())


class ImageAttributesForm(forms.Form):
    """The image page's form (leads): the subject and both sets of attributes as they should be."""

    subject_id = forms.CharField(
        max_length=200, required=False, label="Subject id", help_text="The person shown (made if new); empty for none."
    )
    subject_attributes = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        required=False,
        label="Subject attributes",
        help_text="The person's (gender, body_shape, ...), for every image of them: one “name: value” per line.",
    )
    attributes = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        label="Image attributes",
        help_text="This photo's own (pose, lighting, ...): one “name: value” per line.",
    )

    def clean_subject_attributes(self) -> dict:
        return _attribute_lines(self.cleaned_data.get("subject_attributes", ""))

    def clean_attributes(self) -> dict:
        return _attribute_lines(self.cleaned_data.get("attributes", ""))
