"""opencode in a cell: the user's opencode setup carried into the cell's private homes.

Used by every arm whose agent is opencode: the ``opencode`` kind, ``command`` with
``usage = "opencode"``, and the supervisor's workers. What a run spent is read in
``agents.opencode``.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..files import write_atomic
from ..spend.meter.accounts import CellRoute
from .agent import agent_version
from .base import ArmConfigError, CellRequest, SettingsReader, other
from .base import path as path_setting
from .misconfig import KindFailures, credentials, endpoint, quota, rate_limit
from .preflight import ProbeCall

#: opencode variables that keep a cell off the network and out of the user's state (tests/OPENCODE_NOTES.md).
OPENCODE_QUIET_ENV = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
}

#: How opencode says its setup failed (its ``error`` events and its log on stderr: the provider's status and body).
CONFIG_FAILURES = KindFailures(
    "the provider's key variable and its baseURL in the opencode config",
    (
        credentials(r"\b40[13]\b.*(Unauthorized|Forbidden|API key|auth)|Incorrect API key|invalid_api_key"
                    r"|invalid x-api-key|ProviderAuthError|authentication_error|API key not valid"),
        quota(r"exceeded your current quota|\b402\b|insufficient_quota|Payment Required|Credit balance is too low"
              r"|Quota exceeded"),
        # OpenAI's 429 says "Rate limit reached for requests"; opencode's log quotes the message without the status.
        rate_limit(r"\b429\b|rate_limit|Too Many Requests|RESOURCE_EXHAUSTED|Rate limit reached"),
        endpoint(r"ECONNREFUSED|ENOTFOUND|Unable to connect|ConnectionRefused|fetch failed"),
    ),
    # Its log (--print-logs) below ERROR: paths, settings, retries under way.
    ignore=r"^timestamp=\S+ level=(DEBUG|INFO|WARN)\b",
)


#: The provider packages the preflight can probe, and the API each speaks.
PROBED_PACKAGES = {"@ai-sdk/openai-compatible": "chat", "@ai-sdk/openai": "responses", "@ai-sdk/anthropic": "anthropic"}
#: opencode's own providers of those packages: where they call and the variable of their key.
BUILT_IN_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
BUILT_IN_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
#: The variable the probe reads a key written in the config itself from.
PROBE_KEY_VARIABLE = "ARENA_PROBE_KEY"


@dataclass(frozen=True)
class OpencodeHome:
    """The user's opencode setup, carried into every cell's private config and data dirs.

    ``config`` is the config text (from the arm's ``config`` setting, else
    ``OPENCODE_CONFIG_CONTENT``, else the file ``OPENCODE_CONFIG`` names, else
    the user's ``opencode.json(c)``), written to the cell's ``OPENCODE_CONFIG``.
    ``auth`` is the user's ``auth.json`` (provider logins), copied mode 0600.
    ``packages`` is a shared directory for provider packages opencode installs
    at run time, linked into each cell so they are downloaded once, not per cell.
    """

    config: str | None
    config_source: str
    auth: Path | None
    packages: Path
    version: str

    @property
    def provenance(self) -> dict[str, Any]:
        digest = hashlib.sha256(self.config.encode()).hexdigest()[:16] if self.config is not None else None
        return {"agent": "opencode", "agent_version": self.version, "opencode_config": self.config_source,
                "opencode_config_sha256": digest}

    def provider_urls(self) -> dict[str, str]:
        """Each configured provider's ``options.baseURL``: where opencode sends that provider's calls.

        Empty when the config is not plain JSON (JSONC comments): the arm's ``upstream`` must say it then.
        """
        try:
            config = json.loads(self.config) if self.config is not None else {}
        except ValueError:
            return {}
        providers = config.get("provider") if isinstance(config, dict) else None
        urls = {}
        for name, provider in (providers.items() if isinstance(providers, dict) else ()):
            options = provider.get("options") if isinstance(provider, dict) else None
            url = options.get("baseURL") if isinstance(options, dict) else None
            if isinstance(url, str) and url:
                urls[str(name)] = url
        return urls

    def probe_call(self, model: str) -> ProbeCall | None:
        """The preflight's call for ``PROVIDER/MODEL`` (``arms.preflight``): the provider's ``baseURL`` and
        ``apiKey`` from the config (``{env:VAR}`` read from the arm's environment, a literal passed as is),
        for the OpenAI-compatible, OpenAI and Anthropic packages; opencode's own ``openai`` and ``anthropic``
        providers when the config does not set them. None (not probed): a login (``auth``), JSONC, another
        package."""
        provider, _, name = model.partition("/")
        try:
            config = json.loads(self.config) if self.config is not None else {}
        except ValueError:
            return None
        entry = (config.get("provider") or {}).get(provider) if isinstance(config, dict) else None
        entry = entry if isinstance(entry, dict) else {}
        options = entry["options"] if isinstance(entry.get("options"), dict) else {}
        package = entry.get("npm") or f"@ai-sdk/{provider}"
        api = PROBED_PACKAGES.get(str(package))
        if api is None or self.auth is not None:
            return None
        base = options.get("baseURL") or (None if entry.get("npm") else BUILT_IN_URLS.get(provider))
        if not isinstance(base, str) or not base:
            return None
        if api == "anthropic":
            base = base.rstrip("/").removesuffix("/v1")  # the SDK's baseURL ends in /v1; the probe adds /v1/messages
        key = options.get("apiKey")
        if isinstance(key, str) and key.startswith("{env:") and key.endswith("}"):
            return ProbeCall(api, None, base, key[5:-1], name)
        if isinstance(key, str):
            return ProbeCall(api, None, base, PROBE_KEY_VARIABLE, name, key=key)
        return ProbeCall(api, None, base, BUILT_IN_KEYS.get(provider, "OPENAI_API_KEY"), name)

    def routed_config(self, route: CellRoute | None) -> str | None:
        """The config with each metered provider's ``baseURL`` pointing at the cell's route (as is without one)."""
        if route is None:
            return self.config
        config = json.loads(self.config) if self.config is not None else {}
        providers = config.setdefault("provider", {})
        for name, url in route.base_urls.items():
            options = providers.setdefault(name, {}).setdefault("options", {})
            options["baseURL"] = url
        return json.dumps(config, indent=2)

    def install(self, request: CellRequest) -> None:
        """Write the config, auth and package links into the cell (never into its run dir).

        A metered cell's config sends every metered provider's calls to the cell's route.
        """
        variables = request.cell.variables
        config_dir = Path(variables["XDG_CONFIG_HOME"]) / "opencode"
        config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        text = self.routed_config(request.meter)
        if text is not None:
            config = Path(variables["OPENCODE_CONFIG"])
            config.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_atomic(config, text)  # a temp file of mode 0600, renamed
        # opencode npm-installs its plugin package into every config dir unless this lock says it is there.
        dependencies = {"@opencode-ai/plugin": self.version}
        (config_dir / "node_modules").mkdir(exist_ok=True)
        (config_dir / "package.json").write_text(json.dumps({"dependencies": dependencies}))
        lock = {"name": "opencode", "lockfileVersion": 3, "requires": True,
                "packages": {"": {"dependencies": dependencies}}}
        (config_dir / "package-lock.json").write_text(json.dumps(lock))
        data_dir = Path(variables["XDG_DATA_HOME"]) / "opencode"
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.auth is not None and self.auth.is_file():
            write_atomic(data_dir / "auth.json", self.auth.read_text(encoding="utf-8"))
        cache_dir = Path(variables["XDG_CACHE_HOME"]) / "opencode"
        cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.packages.mkdir(parents=True, exist_ok=True)
        link = cache_dir / "packages"
        if not link.exists():
            link.symlink_to(self.packages, target_is_directory=True)


def _user_dir(variable: str, fallback: str) -> Path:
    value = os.environ.get(variable)
    return Path(value) if value else Path.home() / fallback


CONFIG = other("config", "a file name or an inline table",
               "an opencode config file (relative to the suite's config file), or an inline table",
               shown="the user's")
AUTH = path_setting("auth", "provider logins, copied into the cell (mode 0600) when the file exists",
                    shown="`$XDG_DATA_HOME/opencode/auth.json`")
PACKAGES = path_setting("packages", "shared directory for provider packages opencode installs at run time",
                        shown="`$XDG_CACHE_HOME/opencode/packages`")
#: The settings ``read_opencode_home`` reads: opencode's setup carried into a cell.
OPENCODE_HOME_SETTINGS = (CONFIG, AUTH, PACKAGES)


def read_opencode_home(reader: SettingsReader, executable: str) -> OpencodeHome:
    """Settings ``config`` (a file or an inline table), ``auth``, ``packages``; defaults from the user's setup."""
    origin = reader.spec.origin
    config_setting = reader.get(CONFIG.name, (str, dict), None, CONFIG.accepts)
    config: str | None
    if isinstance(config_setting, dict):
        try:
            config, source = json.dumps(config_setting, indent=2, allow_nan=False), "arm table"
        except ValueError:
            raise ArmConfigError(f"{origin}: field 'config': holds nan or inf, which JSON (opencode.json) "
                                 "cannot hold; give a finite number") from None
    elif isinstance(config_setting, str):
        path = (reader.spec.base_dir / config_setting).resolve()
        if not path.is_file():
            raise ArmConfigError(f"{origin}: field 'config': {path} does not exist")
        config, source = path.read_text(encoding="utf-8"), str(path)
    else:
        config, source = _user_config()
    auth_setting = reader.read(AUTH)
    if auth_setting is not None and not auth_setting.is_file():
        raise ArmConfigError(f"{origin}: field 'auth': {auth_setting} does not exist")
    auth = auth_setting or _user_dir("XDG_DATA_HOME", ".local/share") / "opencode" / "auth.json"
    packages = reader.read(PACKAGES) or _user_dir("XDG_CACHE_HOME", ".cache") / "opencode" / "packages"
    return OpencodeHome(config, source, auth if auth.is_file() else None, packages,
                        agent_version(executable, origin))


def _user_config() -> tuple[str | None, str]:
    inline = os.environ.get("OPENCODE_CONFIG_CONTENT")
    if inline:
        return inline, "OPENCODE_CONFIG_CONTENT"
    candidates = [os.environ.get("OPENCODE_CONFIG")] + [
        str(_user_dir("XDG_CONFIG_HOME", ".config") / "opencode" / name)
        for name in ("opencode.json", "opencode.jsonc", "config.json")
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate).read_text(encoding="utf-8"), candidate
    return None, "none"
