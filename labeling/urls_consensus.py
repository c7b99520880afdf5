"""URLs of the consensus pages and API (included from config/urls.py)."""

urlpatterns: list = []
