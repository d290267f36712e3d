"""Number formats and Markdown tables of bench.md: rates in G units with three significant digits or so, and "-"
for a value that is missing."""

LEVELS = ("l1", "l2", "dram")


def fmt_rate(value):
    if value is None:
        return "-"
    g = value / 1e9
    return f"{g:.1f}" if g >= 10 else f"{g:.2f}" if g >= 1 else f"{g:.3f}"


def fmt_unit(value, unit):
    return "-" if value is None else f"{fmt_rate(value)} {unit}"


def fmt_spread(spread, fmt=fmt_rate):
    """' [lowest–highest]' of a (lowest, highest, repetitions) spread, or '' without one."""
    if not spread:
        return ""
    return f" [{fmt(spread[0])}–{fmt(spread[1])}]"


def ratio_spread(value, spread, base, base_spread):
    """(lowest, highest) of value / base over the repetitions' extremes (slowest over fastest, fastest over
    slowest), or None when neither side has repetitions."""
    if not (spread or base_spread) or not base:
        return None
    lo, hi = (spread[0], spread[1]) if spread else (value, value)
    base_lo, base_hi = (base_spread[0], base_spread[1]) if base_spread else (base, base)
    return (lo / base_hi, hi / base_lo) if base_lo and base_hi else None


def fmt_frac(value):
    return "-" if value is None else f"{value:.2f}"


def fmt_bytes(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def cell(text):
    return str(text).replace("|", "/").replace("\n", " ")


def table(head, rows, align=None):
    align = align or ["---"] + ["---:"] * (len(head) - 1)
    out = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return out


def size_key(arg):
    return (0, int(arg), "") if str(arg).isdigit() else (1, 0, str(arg))


def level_key(arg):
    return (LEVELS.index(arg), "") if arg in LEVELS else (len(LEVELS), str(arg))
