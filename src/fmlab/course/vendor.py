"""Vendored web assets: reveal.js and KaTeX, fetched once from the npm registry, so the decks work offline.

    python -m fmlab.course.vendor build/slides/assets    # fetch (if needed) and unpack both packages there

`npm pack NAME@VERSION` downloads the package tarball (npm checks it against the registry's integrity), we
check it again against the sha512 pinned below, keep it in build/vendor/ so later builds need no network,
and unpack only the files the decks load. Nothing here is committed to git: it is rebuilt from the pins.
Without npm, put the two .tgz files named below in build/vendor/ by hand and the build uses them.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from fmlab.environment import ROOT

CACHE = ROOT / "build" / "vendor"


class VendorError(RuntimeError):
    """A vendored package could not be fetched or did not match its pin."""


@dataclass(frozen=True)
class NpmPackage:
    """One pinned npm package and the files of it that the decks use."""

    name: str
    version: str
    integrity: str  # sha512 of the tarball, as `npm view NAME@VERSION dist.integrity` prints it
    keep: tuple[str, ...]  # path prefixes inside the package to unpack
    skip_suffixes: tuple[str, ...] = (".map", ".esm.js")

    @property
    def tarball(self) -> str:
        return f"{self.name}-{self.version}.tgz"

    def wanted(self, path: str) -> bool:
        return path.startswith(self.keep) and not path.endswith(self.skip_suffixes)


REVEAL = NpmPackage(
    "reveal.js", "5.2.1",
    "sha512-r7//6mIM5p34hFiDMvYfXgyjXqGRta+/psd9YtytsgRlrpRzFv4RbH76TXd2qD+7ZPZEbpBDhdRhJaFgfQ7zNQ==",
    keep=("LICENSE", "dist/reset.css", "dist/reveal.css", "dist/reveal.js", "dist/theme/white.css",
          "dist/theme/fonts/source-sans-pro/", "plugin/notes/notes.js", "plugin/highlight/highlight.js",
          "plugin/highlight/monokai.css"),
)
KATEX = NpmPackage(
    "katex", "0.16.22",
    "sha512-XCHRdUw4lf3SKBaJe4EvgqIuWwkPSo9XoeO8GjQW94Bp7TWv9hNhzZjZ+OH9yf1UmLygb7DIT5GSFQiyt16zYg==",
    keep=("LICENSE", "dist/katex.min.css", "dist/katex.min.js", "dist/contrib/auto-render.min.js", "dist/fonts/"),
)
PACKAGES = (REVEAL, KATEX)


def sri_sha512(path: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def fetch(package: NpmPackage, cache: Path = CACHE) -> Path:
    """The package's tarball in `cache`, downloaded with `npm pack` when missing, checked against its pin."""
    cache.mkdir(parents=True, exist_ok=True)
    tarball = cache / package.tarball
    if not tarball.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise VendorError(f"building the slides needs {package.name}@{package.version} from the npm registry, "
                              f"and npm is not installed: install Node.js (e.g. `apt-get install -y npm`) or put "
                              f"{package.tarball} in {cache}/")
        done = subprocess.run([npm, "pack", f"{package.name}@{package.version}", "--pack-destination", str(cache)],
                              capture_output=True, text=True)
        if done.returncode != 0 or not tarball.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise VendorError(f"`npm pack {package.name}@{package.version}` failed (exit {done.returncode}): "
                              + " | ".join(tail) + ". Check that the npm registry is reachable.")
    found = sri_sha512(tarball)
    if found != package.integrity:
        tarball.unlink()
        raise VendorError(f"{tarball} has {found[:20]}..., the pin says {package.integrity[:20]}...: deleted it; "
                          f"run again to download it afresh, or update the pin in fmlab/vendor.py on purpose")
    return tarball


def unpack(package: NpmPackage, destination: Path, cache: Path = CACHE) -> Path:
    """Unpack the wanted files of `package` into destination/NAME (skipped when that version is already there)."""
    target = destination / package.name
    stamp = target / ".fmlab-version"
    if stamp.exists() and stamp.read_text().strip() == package.version:
        return target
    tarball = fetch(package, cache)
    if target.exists():
        shutil.rmtree(target)
    with tarfile.open(tarball, "r:gz") as archive:
        for member in archive.getmembers():
            inner = PurePosixPath(member.name)
            if not member.isfile() or inner.parts[:1] != ("package",) or ".." in inner.parts:
                continue
            relative = "/".join(inner.parts[1:])
            if package.wanted(relative):
                out = target / relative
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(archive.extractfile(member).read())
    stamp.write_text(package.version + "\n")
    return target


def vendor_all(destination: Path, cache: Path = CACHE) -> dict[str, Path]:
    """Every pinned package unpacked under `destination`: {"reveal.js": path, "katex": path}."""
    return {p.name: unpack(p, destination, cache) for p in PACKAGES}


if __name__ == "__main__":
    for name, path in vendor_all(Path(sys.argv[1] if len(sys.argv) > 1 else "build/slides/assets")).items():
        print(f"{name:<10} {path}")
