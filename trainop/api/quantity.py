"""Just enough of Kubernetes resource quantities to add up pod requests for a PodGroup."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

_SUFFIXES = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}


def parse(value: str | int | float) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"invalid resource quantity {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    text = value.strip()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if suffix and text.endswith(suffix):
            number, factor = text[: -len(suffix)], _SUFFIXES[suffix]
            break
    else:
        number, factor = text, Decimal(1)
    try:
        return Decimal(number) * factor
    except InvalidOperation:
        raise ValueError(f"invalid resource quantity {value!r}") from None


def format_quantity(value: Decimal) -> str:
    """Whole numbers plainly, fractions in milli-units (rounded up, as Kubernetes does)."""
    if value == value.to_integral_value():
        return str(int(value))
    milli = (value * 1000).to_integral_value(rounding="ROUND_CEILING")
    return f"{int(milli)}m"
