"""URLs of the baselines pages and API (included from config/urls.py)."""

urlpatterns: list = []
