"""Settings of the small Django project whose test run is in the parser corpus (like Django's test_sqlite)."""

SECRET_KEY = "corpus"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3"}}
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "shop"]
ROOT_URLCONF = "shop.urls"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
