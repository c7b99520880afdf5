"""The REST API, one module per resource; ``labeling.api.urls`` registers them in one router.

Views are thin: they validate payloads and call services and selectors. Who may do what
is decided by ``selectors.project_access``; its refusals, like the services' validation
errors, become answers in ``labeling.api.errors`` (never here).
"""
