"""The API's settings, from ACS_* environment variables."""
from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Union
from urllib.parse import urlsplit

from pydantic import SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from harvest.link_secret import local_secret
from ledger.store.db import REPO_ROOT, default_database_url

# What earlier versions signed harvest download links with when no secret was set: public, so
# refused everywhere (check_link_secret). An install without a secret now makes its own.
DEV_HARVEST_LINK_SECRET = "development-only-harvest-link-secret"


Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]


def parse_trusted_networks(text: str) -> tuple[Network, ...]:
    """The networks of ACS_TRUSTED_PROXIES ("" for none); ValueError names an entry that is neither
    an address nor a CIDR range."""
    networks = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(f"ACS_TRUSTED_PROXIES names {entry!r}, which is neither an address nor a CIDR "
                             "range. Write addresses and ranges apart with commas, such as 10.0.0.0/8,192.0.2.7.") from None
    return tuple(networks)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ACS_", env_nested_delimiter="__", extra="ignore")

    profile: str = "embedded"
    database_url: str | None = None  # None: the embedded SQLite file under var/ (ledger_url)
    # The embedded default (`python -m cluster.embedded`): its local Ray's CPUs and its port.
    num_cpus: int = 2
    port: int = 8000
    # The locally built model folders; None: <repo>/models (cluster/build_models.py).
    models_dir: Path | None = None
    # Streams: a `: keepalive` comment when Inference is silent this long.
    keepalive_s: float = 5.0
    # A stream of what grows (a Loom's) is pushed its changes (domain/feeds), and reads the ledger
    # this often anyway: a message that was lost, or never sent, delays an update at most this long.
    stream_catch_up_s: float = 2.0
    # Without a stream: past this, answer 200 and send spaces until the JSON.
    long_wait_s: float = 150.0
    # The most the API waits for Inference's answer, or between two chunks.
    engine_timeout_s: float = 14 * 60.0
    max_body_bytes: int = 8 * 1024 * 1024
    # POST /v1/harvest alone takes up to 50 MiB (its prompts and directions).
    harvest_max_body_bytes: int = 50 * 1024 * 1024
    breaker_failures: int = 5
    breaker_open_s: float = 60.0
    max_in_flight_per_model: int = 100
    health_timeout_s: float = 2.0
    budget_request_url: str = "https://v2.infra.acsresearch.org/usage/request"
    monthly_allowance: int = 5_000_000
    # A Hold whose process stops renewing it this long is released.
    hold_lease_s: float = 60.0
    # Shared traffic state (buckets, the per-key line) for several ingress
    # replicas; without it, one process keeps them (the embedded default).
    redis_url: str | None = None
    # Background work (deployments/background): a Runner renews its leases this often
    # over this span; a row whose lease lapsed (its Runner died) runs again.
    runner_lease_s: float = 30.0
    # The fallback for work that no nudge announced (a lapsed lease's row, a lost nudge).
    runner_poll_s: float = 1.0
    # A planned stop gives running work this long, then queues it again.
    runner_grace_s: float = 10.0
    # How often a Runner drops expired Job results and Idempotency-Keys.
    runner_housekeeping_s: float = 600.0
    # Background work (Jobs, Loom Nodes, Playground Runs) waits this long for
    # Inference's answer to start, through a cold start.
    background_answer_wait_s: float = 45 * 60.0
    # An ended Job's result is kept this long (the spec: 30 days), then 410.
    job_result_kept_s: float = 30 * 24 * 3600.0
    # "development" (the default) or anything else, such as "production": outside development
    # an unset harvest link secret and an empty metrics token are refused.
    environment: str = "development"
    # Harvest files: a local folder, or a URI that pyarrow.fs opens (s3://bucket/prefix, gs://...).
    harvest_storage: str = str(REPO_ROOT / "var" / "harvests")
    # The HMAC key of harvest download links; every ingress replica needs the same one. None: in
    # development, the install's own random one, kept in harvest_link_secret_file (0600).
    harvest_link_secret: SecretStr | None = None
    harvest_link_secret_file: Path = REPO_ROOT / "var" / "harvest-link-secret"
    # Where links point: the API's public URL without /v1 (the App's pages hang there too). The App's
    # mails link nowhere else, never to a request's Host; outside development it must be set
    # (check_public_base_url). None: harvest links take the request's own base URL, and in
    # development the mails take http://127.0.0.1:<port> (domain/mail.py, mail_base_url).
    public_base_url: str | None = None
    # The proxies (addresses or CIDR ranges, apart with commas) whose X-Forwarded-For names the client
    # that the try limits count (api/client_address.py); none by default: the peer is the client.
    trusted_proxies: str = ""
    # A download link works this long after the answer that made it (the spec: 7 days).
    harvest_link_ttl_s: int = 7 * 24 * 3600
    # GET /metrics: when set, a scrape sends `Authorization: Bearer <token>`; empty, the route is
    # open, which development alone allows (check_metrics_token).
    metrics_token: SecretStr = SecretStr("")
    # /metrics reads the ledger's counts at most this often, however often Prometheus scrapes.
    metrics_ledger_cache_s: float = 5.0
    # With ACS_REDIS_URL, each process adds the requests and tokens it counted to the cluster's
    # totals in Redis this often (and the replica that answers a scrape at once), under this prefix.
    metrics_flush_s: float = 1.0
    metrics_redis_prefix: str = "acs:metrics:"
    # New GPU work pauses when the GPUs cost this much in 24 hours (from the last Clear),
    # estimated from the model replicas counted this often (spec: "Spend limit").
    spend_pause_usd: float = 3000.0
    spend_sample_s: float = 60.0
    # The amounts of that same count that mail the team (ACS_TEAM_EMAIL) once each time the spend
    # crosses one: ACS_SPEND_WARN_USD='[1000, 2000]' (JSON); '[]' warns no one.
    spend_warn_usd: list[float] = [1000.0, 2000.0]
    # The App's mail (password links): smtp://[user:pass@]host:port, smtp+starttls://... or smtps://...;
    # None: each mail is an .eml file in mail_outbox (a development machine without a mail server).
    smtp_url: SecretStr | None = None
    mail_from: str = "ACS Infra <infra@localhost>"
    mail_outbox: Path = REPO_ROOT / "var" / "outbox"
    # Where each new Application and token request is mailed, through the same outbox (ACS_TEAM_EMAIL);
    # None or empty: the team gets no mail.
    team_email: str | None = None
    # The session cookie's Secure flag; None: set when the request came over https (or a proxy says so).
    session_cookie_secure: bool | None = None
    # Support and Feedback (the App's Support menu, Send feedback): the Discord server's invite, which
    # /account/me hands the App (None or empty: no Discord in the menu); where a note also becomes a
    # Linear issue, the API key (sent as Authorization) and the team's id (None: notes stay here alone).
    discord_invite_url: str | None = None
    linear_api_key: SecretStr | None = None
    linear_team_id: str | None = None
    linear_api_url: str = "https://api.linear.app/graphql"
    linear_timeout_s: float = 20.0

    # Sign-in providers (domain/account/providers.py): each is offered when its client id and secret are
    # set, with the redirect URI <ACS_PUBLIC_BASE_URL>/account/providers/<id>/callback registered at the
    # provider. GitHub, Google and Hugging Face are presets; ACS_OIDC_* is any OpenID Connect issuer
    # (its discovery document is <issuer>/.well-known/openid-configuration), shown as "Continue with
    # <ACS_OIDC_NAME>".
    github_client_id: str | None = None
    github_client_secret: SecretStr | None = None
    google_client_id: str | None = None
    google_client_secret: SecretStr | None = None
    hugging_face_client_id: str | None = None
    hugging_face_client_secret: SecretStr | None = None
    oidc_name: str | None = None
    oidc_issuer: str | None = None
    oidc_client_id: str | None = None
    oidc_client_secret: SecretStr | None = None

    @model_validator(mode="after")
    def check_link_secret(self) -> Settings:
        if self.harvest_link_secret is None:
            if self.environment.strip().lower() != "development":
                # Each replica would make a secret of its own: links of one would fail on the others.
                raise ValueError(
                    f"ACS_HARVEST_LINK_SECRET is not set, and ACS_ENVIRONMENT is {self.environment!r}: every "
                    "ingress replica needs the same secret to sign harvest download links. Set it to a secret "
                    "of your own, such as the output of `python -c 'import secrets; print(secrets.token_hex(32))'`.")
            self.harvest_link_secret = SecretStr(local_secret(self.harvest_link_secret_file))
        secret = self.harvest_link_secret.get_secret_value()
        if not secret:
            raise ValueError("ACS_HARVEST_LINK_SECRET is empty: set it to a secret of your own.")
        if secret == DEV_HARVEST_LINK_SECRET:
            raise ValueError(
                "ACS_HARVEST_LINK_SECRET is the development secret of earlier versions, which is public: anyone "
                "could sign harvest download links. Set it to a secret of your own, such as the output of "
                "`python -c 'import secrets; print(secrets.token_hex(32))'`, or leave it unset on a "
                "development machine, which then makes its own.")
        return self

    @property
    def harvest_link_key(self) -> bytes:
        """The HMAC key of harvest download links: check_link_secret has set the secret, or refused."""
        if self.harvest_link_secret is None:
            raise RuntimeError("the harvest link secret is set as the settings are made (check_link_secret)")
        return self.harvest_link_secret.get_secret_value().encode("utf-8")

    @model_validator(mode="after")
    def check_cluster_state(self) -> Settings:
        # Ray turns an unset ${ACS_DATABASE_URL} of a cluster's env into "": each replica would
        # then keep its own SQLite ledger, and tokens held on one would be unknown to the others;
        # without Redis each ingress replica would keep its own lines and rate buckets.
        if self.environment.strip().lower() == "development":
            return self
        if not (self.database_url or "").strip():
            raise ValueError(
                f"ACS_DATABASE_URL is empty, and ACS_ENVIRONMENT is {self.environment!r}: every replica "
                "would keep a ledger of its own. Set it to the cluster's PostgreSQL, such as "
                "postgresql+asyncpg://acs:PASSWORD@db.internal:5432/acs."
            )
        if not (self.redis_url or "").strip():
            raise ValueError(
                f"ACS_REDIS_URL is empty, and ACS_ENVIRONMENT is {self.environment!r}: every ingress replica "
                "would keep its own per-key lines and rate limits. Set it to the cluster's Redis, such as "
                "redis://redis.internal:6379/0."
            )
        return self

    @model_validator(mode="after")
    def check_public_base_url(self) -> Settings:
        # The App's mails carry password links: their address must come from the operator, never from
        # a request's Host header, which anyone who sends the request chooses.
        base = (self.public_base_url or "").strip()
        if base and (urlsplit(base).scheme not in ("http", "https") or not urlsplit(base).netloc):
            raise ValueError(f"ACS_PUBLIC_BASE_URL is {base!r}: write the platform's public URL with its "
                             "scheme, such as https://infra.example.org.")
        if base or self.environment.strip().lower() == "development":
            return self
        raise ValueError(
            f"ACS_PUBLIC_BASE_URL is empty, and ACS_ENVIRONMENT is {self.environment!r}: the App's mails "
            "would have no address of the App to link to. Set it to the platform's public URL, such as "
            "https://infra.example.org."
        )

    @model_validator(mode="after")
    def check_linear(self) -> Settings:
        # A key without a team would fail each note's issue, quietly: say so at the start instead.
        if (self.linear_api_key and self.linear_api_key.get_secret_value().strip()
                and not (self.linear_team_id or "").strip()):
            raise ValueError("ACS_LINEAR_API_KEY is set, and ACS_LINEAR_TEAM_ID is empty: Linear needs the team that "
                             "feedback notes become issues of. Set it to the team's id (Linear's Settings, the "
                             "team's page, or the API's `teams` query).")
        return self

    @model_validator(mode="after")
    def check_trusted_proxies(self) -> Settings:
        parse_trusted_networks(self.trusted_proxies)  # an entry that is no address stops the start, named
        return self

    @property
    def trusted_networks(self) -> tuple[Network, ...]:
        """The networks of ACS_TRUSTED_PROXIES (api/client_address.py): parsed again where read, a few
        microseconds, so that a copy of the settings with other proxies is never stale."""
        return parse_trusted_networks(self.trusted_proxies)

    @model_validator(mode="after")
    def check_metrics_token(self) -> Settings:
        # Ray turns an unset ${ACS_METRICS_TOKEN} of cluster/serve-gpu.yaml into "": GET /metrics, on the
        # API's public port, would answer anyone.
        if self.metrics_token.get_secret_value().strip() or self.environment.strip().lower() == "development":
            return self
        raise ValueError(
            f"ACS_METRICS_TOKEN is empty, and ACS_ENVIRONMENT is {self.environment!r}: GET /metrics would "
            "answer anyone who reaches the API. Set it to a token of your own, such as the output of "
            "`python -c 'import secrets; print(secrets.token_hex(32))'`, and give Prometheus the same.")

    def ledger_url(self) -> str:
        """The ledger's database: ACS_DATABASE_URL, or the embedded SQLite file."""
        return (self.database_url or "").strip() or default_database_url()


def get_settings() -> Settings:
    """The settings of this process's environment, read anew at each call: the entries and the
    composition root (cluster/) read them once and hand them down; nothing keeps a copy aside."""
    return Settings()
