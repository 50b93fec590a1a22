"""What makes an RPC URL usable, in one place for the configuration and the chain client (pure
standard library: the configuration must not load the chain layer)."""

from __future__ import annotations

from urllib.parse import urlsplit


def rpc_url_problem(rpc_url: str) -> str | None:
    """None for an http(s) URL with a host; else one line saying what to write instead."""
    parsed = urlsplit(rpc_url)
    if parsed.scheme in ("http", "https") and parsed.netloc:
        return None
    if "://" not in rpc_url:
        return f"RPC URL {rpc_url!r} has no scheme: write http://{rpc_url} (or https://{rpc_url})"
    return f"RPC URL {rpc_url!r} is not an http:// or https:// URL with a host"
