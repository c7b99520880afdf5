from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..models import (
    Assignment,
    Image,
    ImportBatch,
    ImportItem,
    Job,
    Label,
    LabelRevision,
    Membership,
    Phase,
    Project,
    Reflection,
    Release,
    Scale,
    Tone,
)
from ..services.releases.rules import CARD_FIELDS, CARD_REQUIRED, MAX_CARD_TEXT
from ..services.submit_rules import MAX_TIME_SPENT_MS

#: The largest id the database stores (a 64-bit primary key): a larger one is a 400, not "bigint out of range".
MAX_ID = 2**63 - 1


def id_field(**kwargs) -> serializers.IntegerField:
    """An object id in a request body: a positive 64-bit integer."""
    return serializers.IntegerField(min_value=1, max_value=MAX_ID, **kwargs)


class ToneSerializer(serializers.ModelSerializer):
    class Meta:
        model = Tone
        fields = ["position", "code", "name", "hex_colour"]


class ScaleSerializer(serializers.ModelSerializer):
    tones = ToneSerializer(many=True, read_only=True)

    class Meta:
        model = Scale
        fields = ["id", "name", "kind", "description", "citation", "is_builtin", "tones"]
        read_only_fields = ["kind", "is_builtin"]


class ToneInputSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=80)
    hex_colour = serializers.RegexField(r"^#[0-9a-fA-F]{6}$", error_messages={"invalid": "Use a colour like #a07e56."})
    code = serializers.CharField(max_length=20, required=False, allow_blank=True)


class ScaleCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=120)
    tones = ToneInputSerializer(many=True, min_length=2, max_length=30)


class ProjectSerializer(serializers.ModelSerializer):
    scale = serializers.PrimaryKeyRelatedField(queryset=Scale.objects.all(), required=False)
    scale_detail = ScaleSerializer(source="scale", read_only=True)
    my_role = serializers.SerializerMethodField()
    n_images = serializers.IntegerField(source="images.count", read_only=True)

    class Meta:
        model = Project
        fields = [
            "id",
            "name",
            "description",
            "scale",
            "scale_detail",
            "labels_per_image",
            "allow_adjacent_pairs",
            "offer_uncertain",
            "skip_reasons",
            "instructions",
            "tone_order",
            "is_demo",
            "created_at",
            "archived_at",
            "my_role",
            "n_images",
        ]
        read_only_fields = ["is_demo", "created_at", "archived_at"]

    def get_my_role(self, project) -> str | None:
        request = self.context.get("request")
        if request is None:
            return None
        m = project.memberships.filter(user=request.user).first()
        return m.role if m else ("lead" if request.user.is_superuser else None)

    def validate_scale(self, scale):
        request = self.context["request"]
        if not scale.is_builtin and scale.created_by_id != request.user.id and not request.user.is_superuser:
            raise serializers.ValidationError("You can use built-in scales or your own custom scales.")
        return scale

    def validate_skip_reasons(self, value):
        if not isinstance(value, list):
            raise serializers.ValidationError("A list of reasons.")
        return value

    def validate_tone_order(self, value):
        if not isinstance(value, list) or not all(isinstance(v, int) for v in value):
            raise serializers.ValidationError("A list of tone numbers.")
        return value


class MembershipSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True)
    email = serializers.CharField(
        source="user.email", read_only=True, help_text="The account's address for password resets (empty: none)."
    )

    class Meta:
        model = Membership
        fields = [
            "id",
            "username",
            "email",
            "role",
            "pseudonym",
            "expertise",
            "region_of_upbringing",
            "gender",
            "share_profile",
            "is_active",
        ]


class MembershipUpdateSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=Membership.Role.choices, required=False)
    is_active = serializers.BooleanField(
        required=False,
        help_text="false: deactivate (they keep their labels but no longer reach the project, get no new work and "
        "no relabel requests); true: reactivate.",
    )


class MembershipCreateSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=128, required=False, write_only=True, allow_blank=True)
    email = serializers.CharField(
        max_length=254,
        required=False,
        allow_blank=True,
        default="",
        help_text="For a new person (recommended): the address a forgotten password is reset through.",
    )
    role = serializers.ChoiceField(choices=Membership.Role.choices, default=Membership.Role.LABELER)
    pseudonym = serializers.CharField(max_length=40, required=False, allow_blank=True)
    expertise = serializers.CharField(max_length=200, required=False, allow_blank=True)
    region_of_upbringing = serializers.CharField(max_length=200, required=False, allow_blank=True)
    gender = serializers.CharField(max_length=100, required=False, allow_blank=True)
    share_profile = serializers.BooleanField(
        required=False, default=False, help_text="The person agreed to their profile appearing in released datasets."
    )


class ImageSerializer(serializers.ModelSerializer):
    subject_id = serializers.CharField(source="subject.external_id", default=None, allow_null=True, read_only=True)
    subject_attributes = serializers.JSONField(source="subject.attributes", default=None, read_only=True)
    thumbnail_url = serializers.SerializerMethodField()
    display_url = serializers.SerializerMethodField()
    box = serializers.SerializerMethodField(
        help_text="One person's box in a photo of several (x, y, width, height in pixels of the photo after its EXIF "
        "orientation); null for a whole photo. The boxes of one photo share its file (the same sha256)."
    )

    class Meta:
        model = Image
        fields = [
            "id",
            "external_id",
            "original_filename",
            "sha256",
            "width",
            "height",
            "box",
            "format",
            "source_mode",
            "exif_orientation",
            "file_size",
            "attributes",
            "subject_id",
            "subject_attributes",
            "mask_kind",
            "derivative_status",
            "is_synthetic",
            "created_at",
            "thumbnail_url",
            "display_url",
        ]

    def get_thumbnail_url(self, image) -> str:
        return reverse("image-file", args=[image.pk, "thumbnail"])

    def get_box(self, image) -> dict | None:
        return image.box_dict

    def get_display_url(self, image) -> str:
        return reverse("image-file", args=[image.pk, "display"])


class ImageAttributesPatchSerializer(serializers.Serializer):
    """``PATCH /api/images/{id}/`` (leads): the image's subject and attributes. ``attributes`` and
    ``subject_attributes`` are merge patches: the names given are set, a name given ``null`` is removed."""

    subject_id = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, help_text="The subject shown (made if new); empty for none"
    )
    attributes = serializers.DictField(
        child=serializers.JSONField(allow_null=True),
        required=False,
        help_text="The image's own attributes (text or numbers)",
    )
    subject_attributes = serializers.DictField(
        child=serializers.JSONField(allow_null=True),
        required=False,
        help_text="Its subject's attributes (gender, body_shape, ...): the person's, for every image of them",
    )


class ImageAttributesRowSerializer(serializers.Serializer):
    row = serializers.IntegerField(help_text="The manifest's row (1 = the CSV header; JSON Lines: the line)")
    image_id = serializers.CharField()
    file = serializers.CharField()
    outcome = serializers.ChoiceField(choices=["updated", "unchanged", "unknown", "rejected"])
    reason = serializers.CharField()
    changed = serializers.ListField(child=serializers.CharField(), help_text="subject_id, attributes.<name>, ...")


class ImageAttributesCountsSerializer(serializers.Serializer):
    updated = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    unknown = serializers.IntegerField()
    rejected = serializers.IntegerField()


class ImageAttributesReportSerializer(serializers.Serializer):
    applied = serializers.BooleanField(help_text="False when a row was rejected (nothing changed) or for a dry run")
    dry_run = serializers.BooleanField()
    counts = ImageAttributesCountsSerializer()
    rows = ImageAttributesRowSerializer(many=True)


class LabelerImageSerializer(serializers.ModelSerializer):
    """What a labeler may know about an image: nothing but the picture (blind labeling)."""

    display_url = serializers.SerializerMethodField()
    box = serializers.SerializerMethodField(
        help_text="The person to label in a photo of several: x, y, width, height in pixels; null for the whole photo."
    )

    class Meta:
        model = Image
        fields = ["id", "width", "height", "display_url", "box"]

    def get_display_url(self, image) -> str:
        return reverse("image-file", args=[image.pk, "display"])

    def get_box(self, image) -> dict | None:
        return image.box_dict


class ImportItemSerializer(serializers.ModelSerializer):
    class Meta:
        model = ImportItem
        fields = ["row", "filename", "outcome", "reason", "image"]


class ImportBatchSerializer(serializers.ModelSerializer):
    items = ImportItemSerializer(many=True, read_only=True)

    class Meta:
        model = ImportBatch
        fields = [
            "id",
            "kind",
            "status",
            "source_name",
            "error",
            "n_imported",
            "n_duplicate",
            "n_rejected",
            "created_at",
            "finished_at",
            "items",
        ]


class PhaseReopeningSerializer(serializers.Serializer):
    reason = serializers.CharField(read_only=True)
    reopened_by = serializers.CharField(source="reopened_by.username", default=None, read_only=True)
    closed_at = serializers.DateTimeField(read_only=True)
    created_at = serializers.DateTimeField(read_only=True)


class PhaseReopenSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000, help_text="Why the phase is reopened (recorded).")


class PhaseSerializer(serializers.ModelSerializer):
    n_images = serializers.IntegerField(source="phase_images.count", read_only=True)
    reopenings = PhaseReopeningSerializer(many=True, read_only=True)

    class Meta:
        model = Phase
        fields = [
            "id",
            "kind",
            "status",
            "labels_per_image",
            "every_labeler",
            "selection_seed",
            "selection_method",
            "n_repeated",
            "opened_at",
            "closed_at",
            "n_images",
            "reopenings",
        ]


class LabelerPhaseSerializer(serializers.ModelSerializer):
    """A phase as a labeler sees it: no selection seed or repeat count (they could reveal the
    calibration-2 repeats and so unblind the test-retest)."""

    class Meta:
        model = Phase
        fields = ["id", "kind", "status", "opened_at", "closed_at"]


class CalibrationConfigureSerializer(serializers.Serializer):
    size = serializers.IntegerField(min_value=1, max_value=MAX_ID, required=False)
    calibration_1_size = serializers.IntegerField(min_value=1, max_value=MAX_ID, required=False)
    n_repeated = serializers.IntegerField(min_value=0, max_value=MAX_ID, required=False)
    seed = serializers.IntegerField(min_value=0, max_value=2**62, required=False)
    image_ids = serializers.ListField(child=id_field(), required=False, max_length=100000)
    external_ids = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        max_length=100000,
        help_text="Or pick by the images' own ids (as in the manifest), e.g. P_astro.",
    )
    every_labeler = serializers.BooleanField(
        required=False, help_text="Every labeler labels every calibration image (instead of labels per image)."
    )


class PhaseOpenSerializer(serializers.Serializer):
    labeler_ids = serializers.ListField(child=id_field(), required=False)
    labels_per_image = serializers.IntegerField(min_value=1, max_value=50, required=False)


class LabelsPerImageSerializer(serializers.Serializer):
    labels_per_image = serializers.IntegerField(min_value=1, max_value=50)


class LabelSubmitSerializer(serializers.Serializer):
    client_id = serializers.UUIDField()
    image = id_field()
    tones = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=1000), required=False, max_length=2
    )
    uncertain = serializers.BooleanField(default=False)
    skip_reason = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    time_spent_ms = serializers.IntegerField(min_value=0, max_value=MAX_TIME_SPENT_MS, default=0)
    tone_order = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=1000), required=False, max_length=30
    )
    client_info = serializers.DictField(required=False)


class LabelRevisionSerializer(serializers.ModelSerializer):
    author = serializers.SerializerMethodField()

    class Meta:
        model = LabelRevision
        fields = [
            "number",
            "client_id",
            "source",
            "tone_low",
            "tone_high",
            "value",
            "uncertain",
            "skip_reason",
            "time_spent_ms",
            "tone_order",
            "client_info",
            "author",
            "reason",
            "created_at",
        ]

    def get_author(self, revision) -> str | None:
        """The author's pseudonym in the project (never a username)."""
        project_id = revision.label.phase.project_id
        if revision.author_id is None:
            return None
        m = Membership.objects.filter(project_id=project_id, user_id=revision.author_id).first()
        return m.pseudonym if m else "staff"


class LabelSerializer(serializers.ModelSerializer):
    labeler = serializers.CharField(source="labeler.pseudonym", read_only=True)
    tones = serializers.SerializerMethodField()

    class Meta:
        model = Label
        fields = [
            "id",
            "phase",
            "image",
            "labeler",
            "is_repeat",
            "tones",
            "tone_low",
            "tone_high",
            "value",
            "uncertain",
            "skip_reason",
            "is_valid",
            "n_revisions",
            "time_spent_ms",
            "created_at",
            "updated_at",
        ]

    def get_tones(self, label) -> list[int]:
        return [t for t in (label.tone_low, label.tone_high) if t is not None]


class MyLabelSerializer(LabelSerializer):
    class Meta(LabelSerializer.Meta):
        fields = ["id", "image", "tones", "value", "uncertain", "skip_reason", "n_revisions", "updated_at"]


class CorrectionSerializer(serializers.Serializer):
    tones = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=1000), required=False, max_length=2
    )
    uncertain = serializers.BooleanField(default=False)
    skip_reason = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    reason = serializers.CharField(max_length=2000)


class RelabelSerializer(serializers.Serializer):
    labeler_ids = serializers.ListField(child=id_field(), min_length=1)
    reason = serializers.CharField(max_length=2000)


class ReflectionSerializer(serializers.ModelSerializer):
    labeler = serializers.CharField(source="labeler.pseudonym", read_only=True)
    skipped = serializers.BooleanField(
        required=False,
        default=False,
        write_only=True,
        help_text="Send true to skip the reflection explicitly; otherwise at least one answer is needed.",
    )

    class Meta:
        model = Reflection
        fields = [
            "labeler",
            "skipped",
            "minutes_taken",
            "unclear_instructions",
            "biases_noticed",
            "biases_other",
            "mindfulness_plan",
            "submitted_at",
        ]
        read_only_fields = ["labeler", "submitted_at"]

    def to_representation(self, instance):
        from ..services.labels import reflection_is_skipped

        data = super().to_representation(instance)
        data["skipped"] = reflection_is_skipped(instance)
        return data


class JobSerializer(serializers.ModelSerializer):
    class Meta:
        model = Job
        fields = [
            "id",
            "kind",
            "status",
            "parameters",
            "total",
            "done",
            "failed",
            "failures",
            "message",
            "created_at",
            "started_at",
            "finished_at",
        ]


class AssignmentSerializer(serializers.ModelSerializer):
    image = LabelerImageSerializer(read_only=True)

    class Meta:
        model = Assignment
        fields = ["id", "position", "kind", "request_reason", "image"]


class ReleaseSerializer(serializers.ModelSerializer):
    """A release with its job's progress; ``files``: the release's files (the imagefolder's images counted,
    not listed); ``download_url``: the zip."""

    job = JobSerializer(read_only=True)
    previous_version = serializers.IntegerField(source="previous.version", read_only=True, allow_null=True)
    files = serializers.SerializerMethodField()
    download_url = serializers.SerializerMethodField()

    class Meta:
        model = Release
        fields = [
            "id",
            "version",
            "status",
            "rule",
            "card_text",
            "code_version",
            "previous_version",
            "summary",
            "error",
            "job",
            "files",
            "download_url",
            "created_at",
            "published_at",
        ]

    def get_files(self, release: Release) -> list[dict]:
        from .. import selectors

        return selectors.release_files(release)["files"]

    def get_download_url(self, release: Release) -> str | None:
        if release.status != Release.Status.PUBLISHED:
            return None
        return reverse("release-download", args=[release.project_id, release.version])


class ReleaseErasureSerializer(serializers.Serializer):
    subject = serializers.CharField(help_text="The erased subject's external id (the images table's subject_id).")
    erased_at = serializers.DateTimeField()
    notice = serializers.CharField(help_text="What the erasure means for this release, in plain words.")


class ReleaseDetailSerializer(ReleaseSerializer):
    """A release with its manifest's description (``manifest``: the release info and the zip's checksum), and the
    subjects erased on request after it was made whose rows it still holds (``erasures``: its files never change)."""

    manifest = serializers.SerializerMethodField()
    erasures = serializers.SerializerMethodField()

    class Meta(ReleaseSerializer.Meta):
        fields = [*ReleaseSerializer.Meta.fields, "manifest", "erasures"]

    @extend_schema_field(ReleaseErasureSerializer(many=True))
    def get_erasures(self, release: Release) -> list:
        from ..services.erasure import release_erasure_notices

        return ReleaseErasureSerializer(release_erasure_notices(release), many=True).data

    def get_manifest(self, release: Release) -> dict:
        manifest = release.manifest or {}
        return {"release": manifest.get("release"), "zip": manifest.get("zip")}


@extend_schema_field(
    {
        "type": "object",
        "properties": {
            key: {
                "type": "string",
                "maxLength": MAX_CARD_TEXT,
                "description": f"{field['title']}{'' if field['required'] else ' (optional)'}: {field['help']}",
            }
            for key, field in CARD_FIELDS.items()
        },
        "required": list(CARD_REQUIRED),
        "additionalProperties": False,
    }
)
class CardTextField(serializers.DictField):
    """The data card's texts (``services.releases.rules.CARD_FIELDS``); the service validates them per field."""


class ReleaseRequestSerializer(serializers.Serializer):
    """What a lead sends to make a release (validated by the service, one error per field)."""

    phases = serializers.JSONField(required=False, help_text='"latest" (default) or a list of phase kinds.')
    aggregation = serializers.ChoiceField(choices=["mean", "median", "mode"], required=False, default="mean")
    tie = serializers.ChoiceField(choices=["lower", "higher", "nearest_mean"], required=False, default="lower")
    min_valid_labels = serializers.IntegerField(required=False, min_value=1, max_value=50, default=2)
    include = serializers.DictField(
        child=serializers.BooleanField(),
        help_text="Every readiness category with true (include its images) or false (exclude them).",
    )
    card_text = CardTextField(
        child=serializers.CharField(allow_blank=True),
        help_text="The data card's texts the lead writes, by field (Datasheets for Datasets and CrowdWorkSheets): "
        f"required {', '.join(CARD_REQUIRED)}; optional "
        f"{', '.join(k for k in CARD_FIELDS if k not in CARD_REQUIRED)}. A missing or blank required field, or "
        "an unknown one, is a 400 with one error per field, named card_text.<field>.",
    )
    with_images = serializers.BooleanField(required=False, default=False)
