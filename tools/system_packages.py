"""Make sure Debian system packages are installed (for noxfile.py sessions).

`ensure_debian_packages(["libvulkan1", ...], probe=...)` checks with dpkg which packages are
missing; as root it runs `apt-get update` and `apt-get install -y --no-install-recommends`,
otherwise it raises SystemPackagesError quoting the exact command to run. A probe (a callable
returning True when usable, or commands that must exit 0) confirms the result, and is the only
check on systems without dpkg.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Callable, Sequence

Probe = Callable[[], bool] | Sequence[str | Sequence[str]] | None


class SystemPackagesError(RuntimeError):
    """Required system packages are missing and could not be installed here."""


def missing_debian_packages(packages: Sequence[str]) -> list[str] | None:
    """Packages among `packages` that dpkg does not report as installed; None without dpkg."""
    if shutil.which("dpkg-query") is None:
        return None
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package}\t${db:Status-Abbrev}\n", *packages],
        capture_output=True,
        text=True,
    )
    installed = set()
    for line in proc.stdout.splitlines():
        name, _, status = line.partition("\t")
        if status.startswith("ii"):
            installed.add(name)
    return [p for p in packages if p.split(":")[0] not in installed]


def apt_install_command(packages: Sequence[str], sudo: bool = False) -> str:
    """The shell command that installs `packages` (what the user is told to run)."""
    prefix = "sudo " if sudo else ""
    return (
        f"{prefix}apt-get update && {prefix}apt-get install -y --no-install-recommends "
        + " ".join(shlex.quote(p) for p in packages)
    )


def _probe_failure(probe: Probe) -> str | None:
    """None when the probe passes (or there is none), else a description of the failure."""
    if probe is None:
        return None
    if callable(probe):
        try:
            return (
                None if probe() else f"probe {getattr(probe, '__name__', probe)!r} returned False"
            )
        except Exception as exc:  # a probe that raises is a failed probe; report why
            return f"probe {getattr(probe, '__name__', probe)!r} raised {exc!r}"
    for cmd in probe:
        argv = shlex.split(cmd) if isinstance(cmd, str) else list(cmd)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True)
        except OSError as exc:
            return f"`{shlex.join(argv)}` could not run: {exc}"
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return f"`{shlex.join(argv)}` exited {proc.returncode}: {' | '.join(tail)}"
    return None


def ensure_debian_packages(packages: Sequence[str], probe: Probe = None) -> None:
    """Install missing Debian `packages` when running as root, else raise with the command.

    `probe`: a callable returning True when the packages are usable, or a list of commands
    (strings or argv lists) that must all exit 0; checked after installing. Without dpkg (not
    Debian) only the probe decides, and a failure names the Debian packages to look for.
    """
    packages = list(packages)
    missing = missing_debian_packages(packages)
    if missing is None:
        failure = _probe_failure(probe)
        if failure:
            raise SystemPackagesError(
                f"{failure}. This is not a Debian system (no dpkg): install the equivalents of "
                f"the Debian packages {' '.join(packages)}"
            )
        return
    if missing:
        if os.geteuid() != 0:
            raise SystemPackagesError(
                f"missing Debian packages: {' '.join(missing)}. Install them with:\n  "
                + apt_install_command(missing, sudo=True)
            )
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for argv in (
            ["apt-get", "update"],
            ["apt-get", "install", "-y", "--no-install-recommends", *missing],
        ):
            proc = subprocess.run(argv, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemPackagesError(
                    f"`{shlex.join(argv)}` failed ({proc.returncode}):\n{proc.stderr.strip()}"
                )
        still = missing_debian_packages(missing) or []
        if still:
            raise SystemPackagesError(f"apt-get install left packages missing: {' '.join(still)}")
    failure = _probe_failure(probe)
    if failure:
        raise SystemPackagesError(
            f"Debian packages {' '.join(packages)} are installed but the check failed: {failure}"
        )
