"""Every signal handler of the app, connected in one place (``LabelingConfig.ready``).

Connecting in ``ready()`` rather than as a side effect of importing the module that
defines the handler means cache invalidation never depends on which module happened
to be imported first (Zulip's ``zerver/apps.py`` does the same).
"""

from django.db.models.signals import post_delete, post_save, pre_save


def connect() -> None:
    from django.contrib.admin.models import LogEntry
    from rest_framework.authtoken.models import Token

    from .api.authentication import token_cache_clear
    from .models import EvaluationRun, Label, Membership, Release
    from .selectors import membership_cache_clear
    from .services.audit import audit_admin_logged, audit_membership_saving, audit_model_saved
    from .services.consensus import label_deleted_count

    # A changed or removed membership must not be served from the membership cache.
    post_save.connect(membership_cache_clear, sender=Membership, dispatch_uid="membership-cache-save")
    post_delete.connect(membership_cache_clear, sender=Membership, dispatch_uid="membership-cache-delete")
    # A deleted token stops working at once, not after the token cache time.
    post_delete.connect(token_cache_clear, sender=Token, dispatch_uid="cached-token-deleted")
    # A deleted label changes its phase's consensus cache version.
    post_delete.connect(label_deleted_count, sender=Label, dispatch_uid="consensus-label-deleted")
    # The audit log of what is saved from several places: a release published, an evaluation run, memberships.
    for model in (Release, EvaluationRun, Membership):
        post_save.connect(audit_model_saved, sender=model, dispatch_uid=f"audit-{model.__name__}")
    pre_save.connect(audit_membership_saving, sender=Membership, dispatch_uid="audit-membership-before")
    # What staff do in the admin (Django's own admin log) goes into the audit log as well.
    post_save.connect(audit_admin_logged, sender=LogEntry, dispatch_uid="audit-admin-log")
