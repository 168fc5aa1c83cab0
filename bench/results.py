"""Shared by the benchmark scripts: the machine line and writing one section of
bench/RESULTS.md without touching the others."""

from __future__ import annotations

import datetime as dt
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def machine_lines(command: str) -> list[str]:
    load = os.getloadavg()
    return [f"- Command: `{command}`",
            f"- Date: {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}",
            f"- Machine: {platform.platform()}, Python {platform.python_version()}, CPU "
            f"{cpu_model()}, nproc {os.cpu_count()}; load average at the end "
            f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1/5/15 min)"]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def write_section(heading: str, body: str) -> None:
    """Replace `heading`'s section of bench/RESULTS.md (up to the next `## `), or append
    it; the file is re-read right before writing and nothing else is touched."""
    path = ROOT / "bench" / "RESULTS.md"
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    lines = text.splitlines(keepends=True)
    section = f"{heading}\n\n{body.rstrip()}\n\n"
    start = next((i for i, l in enumerate(lines) if l.rstrip() == heading), None)
    if start is None:
        new = text.rstrip("\n") + "\n\n" + section
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        new = "".join(lines[:start]) + section + "".join(lines[end:])
    path.write_text(new.rstrip("\n") + "\n")
    print(f"wrote {heading!r} in {path}", file=sys.stderr)
