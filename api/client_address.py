"""Who a request comes from, for the limits that count tries per address (sign-in, links, passwords,
Applications, wrong API keys), and whether it came over https (HSTS, Secure cookies): what a proxy in
front of the platform may say, answered in one place.

uvicorn trusts no proxy (cluster/serve.env sets FORWARDED_ALLOW_IPS empty), so the ASGI scope's client
is the peer that connected. Only a peer that ACS_TRUSTED_PROXIES names (addresses or CIDR ranges) may
say who the client is: then the client is the right-most X-Forwarded-For entry that is not itself a
trusted proxy. Every entry left of that one was written by the client, who can write anything.

    ACS_TRUSTED_PROXIES=10.0.0.0/8,192.0.2.7   # a load balancer's private range, and one more proxy
"""
from __future__ import annotations

import ipaddress
from typing import Any

from fastapi import Request
from starlette.types import Scope

from domain.settings import Network

UNKNOWN = "unknown"


def client_address(request: Request) -> str:
    """The peer's address; behind a trusted proxy, the address that the proxies forwarded."""
    peer = request.client.host if request.client else UNKNOWN
    networks = _settings(request).trusted_networks
    if not is_trusted(peer, networks):
        return peer
    client = peer
    for entry in reversed(_forwarded(request)):
        client = entry
        if not is_trusted(client, networks):
            break  # the first hop that no trusted proxy vouches for: the client
    return client


def came_over_https(scope: Scope) -> bool:
    """https as the ASGI server saw it, or as a trusted proxy that ended TLS says in X-Forwarded-Proto
    (its first entry: what the proxy nearest the client saw; later ones append their own hop)."""
    if scope.get("scheme") == "https":
        return True
    values = [value.decode("latin-1") for key, value in scope.get("headers", []) if key.lower() == b"x-forwarded-proto"]
    if ",".join(values).split(",")[0].strip().lower() != "https":
        return False
    services = getattr(getattr(scope.get("app"), "state", None), "services", None)
    networks = services.settings.trusted_networks if services else ()
    return is_trusted((scope.get("client") or (UNKNOWN,))[0], networks)


def _settings(request: Request) -> Any:
    return request.app.state.services.settings


def _forwarded(request: Request) -> list[str]:
    """Each X-Forwarded-For entry in order, without ports, over every copy of the header."""
    entries = (entry for value in request.headers.getlist("x-forwarded-for") for entry in value.split(","))
    return [host for host in (_host(entry) for entry in entries) if host][-64:]


def _host(entry: str) -> str:
    """`192.0.2.1`, `192.0.2.1:443`, `2001:db8::1` or `[2001:db8::1]:443` as its address alone."""
    entry = entry.strip()
    if entry.startswith("["):
        return entry[1:].split("]", 1)[0]
    if entry.count(":") == 1:
        return entry.split(":", 1)[0]
    return entry[:100]


def is_trusted(host: str, networks: tuple[Network, ...]) -> bool:
    """Whether `host` is an address inside one of the trusted proxies' networks."""
    if not networks:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False  # not an address: nobody we trust
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped  # ::ffff:10.0.0.7 is 10.0.0.7
    return any(address in network for network in networks)
