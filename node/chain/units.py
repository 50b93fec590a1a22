"""Human units: ether amounts and Unix times, parsed and shown one way everywhere."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation, localcontext

WEI_PER_ETH = 10**18


def format_eth(wei: int) -> str:
    """``1500000000000000000`` -> ``"1.5 ETH"`` (exact, no trailing zeros)."""
    with localcontext(prec=120):
        value = (Decimal(wei) / WEI_PER_ETH).normalize()
    return f"{format(value, 'f')} ETH"


def parse_eth(text: str) -> int:
    """``"1.5"`` or ``"1.5 ETH"`` -> wei; ``"1000 wei"`` -> 1000; ValueError on anything else."""
    cleaned = text.strip().lower()
    unit = WEI_PER_ETH
    if cleaned.endswith("wei"):
        cleaned, unit = cleaned[:-3].strip(), 1
    elif cleaned.endswith("eth"):
        cleaned = cleaned[:-3].strip()
    try:
        with localcontext(prec=120):
            amount = Decimal(cleaned) * unit
    except InvalidOperation:
        raise ValueError(
            f"not an amount of ether: {text!r} (examples: 0.5, 1 ETH, 1000 wei)"
        ) from None
    if amount < 0 or amount != amount.to_integral_value():
        raise ValueError(f"not a whole, non-negative number of wei: {text!r}")
    return int(amount)


def format_timestamp(unix_time: int) -> str:
    """``1767225600`` -> ``"2026-01-01 00:00:00 UTC"``."""
    return datetime.fromtimestamp(unix_time, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def format_duration(seconds: int) -> str:
    """``3725`` -> ``"1 h 2 min 5 s"``; ``0`` -> ``"0 s"``."""
    seconds = max(0, int(seconds))
    parts = []
    for size, unit in ((86_400, "d"), (3_600, "h"), (60, "min")):
        if seconds >= size:
            parts.append(f"{seconds // size} {unit}")
            seconds %= size
    if seconds or not parts:
        parts.append(f"{seconds} s")
    return " ".join(parts)


def format_deadline(unix_time: int, now: int | None) -> str:
    """A time as a date, plus how long until it when the current (chain) time is known."""
    text = format_timestamp(unix_time)
    if now is None:
        return text
    left = unix_time - now
    return f"{text} (in {format_duration(left)})" if left > 0 else f"{text} (now)"
