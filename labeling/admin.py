"""Staff manage everything here. Label revisions are read-only: nothing is ever overwritten."""

from django.contrib import admin

from . import models


class ToneInline(admin.TabularInline):
    model = models.Tone
    extra = 0


@admin.register(models.Scale)
class ScaleAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "is_builtin", "created_by"]
    inlines = [ToneInline]


class MembershipInline(admin.TabularInline):
    """No delete box: a membership's labels must never go with it (``Label.labeler`` is PROTECT);
    untick "is active" to take someone off the project."""

    model = models.Membership
    extra = 0
    raw_id_fields = ["user"]
    can_delete = False


@admin.register(models.Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "scale", "labels_per_image", "is_demo", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]


@admin.register(models.Membership)
class MembershipAdmin(admin.ModelAdmin):
    """Memberships are deactivated, never deleted (their labels stay; see ``MembershipInline``)."""

    list_display = ["pseudonym", "user", "project", "role", "is_active"]
    list_filter = ["role", "project", "is_active"]
    search_fields = ["pseudonym", "user__username"]
    actions = ["deactivate"]

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.action(description="Deactivate the selected memberships (their labels are kept)")
    def deactivate(self, request, queryset):
        # One save per row (not .update()): post_save clears each membership's cache entry.
        for membership in queryset.filter(is_active=True):
            membership.is_active = False
            membership.save(update_fields=["is_active"])


@admin.register(models.Subject)
class SubjectAdmin(admin.ModelAdmin):
    list_display = ["external_id", "project"]
    search_fields = ["external_id"]
    list_filter = ["project"]


@admin.register(models.Image)
class ImageAdmin(admin.ModelAdmin):
    list_display = ["external_id", "project", "subject", "width", "height", "format", "derivative_status"]
    list_filter = ["project", "derivative_status", "format"]
    search_fields = ["external_id", "sha256", "original_filename"]
    readonly_fields = ["sha256", "file_size", "width", "height", "format", "source_mode", "exif_orientation"]
    raw_id_fields = ["subject", "import_batch"]


class ImportItemInline(admin.TabularInline):
    model = models.ImportItem
    extra = 0
    can_delete = False
    readonly_fields = ["row", "filename", "outcome", "reason", "image"]


@admin.register(models.ImportBatch)
class ImportBatchAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "kind", "status", "n_imported", "n_duplicate", "n_rejected", "created_at"]
    list_filter = ["kind", "status"]
    inlines = [ImportItemInline]


@admin.register(models.Phase)
class PhaseAdmin(admin.ModelAdmin):
    list_display = ["project", "kind", "status", "labels_per_image", "opened_at", "closed_at"]
    list_filter = ["kind", "status", "project"]


@admin.register(models.Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ["phase", "labeler", "image", "position", "kind", "is_repeat", "done_at"]
    list_filter = ["phase__kind", "kind"]
    raw_id_fields = ["image", "relabel_of", "labeler", "phase"]


class RevisionInline(admin.TabularInline):
    model = models.LabelRevision
    extra = 0
    can_delete = False
    readonly_fields = [f.name for f in models.LabelRevision._meta.fields]

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(models.Label)
class LabelAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "phase",
        "image",
        "labeler",
        "tone_low",
        "tone_high",
        "value",
        "uncertain",
        "skip_reason",
        "n_revisions",
    ]
    list_filter = ["phase__kind", "is_repeat", "uncertain"]
    readonly_fields = [f.name for f in models.Label._meta.fields]
    inlines = [RevisionInline]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(models.Reflection)
class ReflectionAdmin(admin.ModelAdmin):
    list_display = ["phase", "labeler", "minutes_taken", "submitted_at"]


@admin.register(models.Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "kind", "status", "done", "failed", "total", "created_at"]
    list_filter = ["kind", "status"]


@admin.register(models.ImageBaseline)
class ImageBaselineAdmin(admin.ModelAdmin):
    list_display = ["image", "status", "ita_median", "ita_class", "skin_fraction", "code_version"]
    list_filter = ["status", "ita_class"]
    raw_id_fields = ["image", "job"]


@admin.register(models.Release)
class ReleaseAdmin(admin.ModelAdmin):
    """Read-only: releases are made by the service, and a published one never changes."""

    list_display = ["project", "version", "status", "created_by", "created_at", "published_at"]
    list_filter = ["status"]
    readonly_fields = [f.name for f in models.Release._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


admin.site.register(models.EvaluationRun)
admin.site.site_header = "FairTone administration"


@admin.register(models.AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    """The audit log, read-only: nothing is added, changed or deleted here (the model refuses too)."""

    list_display = ["created_at", "project_name", "project_id", "username", "action", "object_type", "object_id"]
    list_filter = ["action"]
    search_fields = ["username", "project_name", "action"]
    date_hierarchy = "created_at"
    actions = None

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
