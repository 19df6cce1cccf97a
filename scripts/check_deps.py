#!/usr/bin/python3
"""Checks that scripts/setup.sh installs every Debian package the project uses.

A package left on a development machine by hand once hid a missing install step: oneDNN's CMake
config calls find_package(OpenCL), libdnnl-dev only *recommends* ocl-icd-opencl-dev, and a fresh
machine failed at the configure while CI, on the old machine, passed. So this check finds the
package that owns every file the configure, the build, the binaries and the scripts use, and
fails, naming the file and its package, when that package is neither in setup.sh's DEBS list nor
reached from it through installed Depends / Pre-Depends (Recommends do not count: setup.sh
installs with --no-install-recommends). Essential packages (on every Debian system) count as
present.

The files looked at:
  - CMakeCache.txt: every absolute path a cache entry names (libraries, headers, programs), and
    the files of every package-config directory (<Pkg>_DIR), which find_package read;
  - the compiler's dependency files of the build (GCC's .o.d, CMake's compiler_depend.make):
    every header the build included;
  - `ldd` of every executable in the build directory: the shared libraries they load;
  - the programs and data the scripts and tests use (PROGRAMS, DATA below).
Files under the CUDA toolkit's /usr/local/cuda* come with the machine image (no package owns
them) and are reported, not failed; any other file outside the build and the repository that no
package owns fails the check.

    scripts/check_deps.py --build build                       # exit 0, or 1 with one line per problem
    scripts/check_deps.py --build build --without ocl-icd-opencl-dev --expect-missing
        # the self-test: succeeds only if dropping that package from the list is caught

Why by hand: Debian has no tool that maps a build's inputs to its packages; dpkg -S per file is
far too slow for the ~10,000 headers a build reads, so this reads dpkg's database directly.
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DPKG = "/var/lib/dpkg"
# Programs the scripts and the tests run (scripts/*.sh, fuzz/run.sh, tests/, bench peers).
PROGRAMS = ["cmake", "ctest", "make", "c++", "g++", "clang++", "node", "npm", "mpirun", "chromium",
            "rsvg-convert", "script", "xz", "tar"]
# Data files the main job, the tests and the report read; Python modules the PyTorch references
# and peers import (under Debian's /usr/bin/python3).
DATA = ["/usr/bin/python3", "/usr/share/games/fortunes/fortunes", "/usr/share/games/fortunes/computers",
        "/usr/share/perl/5.36.0/pod/perlfunc.pod",
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"]
PY_MODULES = ["torch", "numpy", "sklearn"]
IMAGE_PREFIXES = ("/usr/local/cuda",)


def setup_packages():
    """The DEBS=( ... ) list of scripts/setup.sh, and the packages it adds conditionally."""
    text = open(os.path.join(REPO, "scripts", "setup.sh")).read()
    m = re.search(r"^DEBS=\((.*?)\)", text, re.S | re.M)
    if not m:
        sys.exit("check_deps: no DEBS=( ... ) list in scripts/setup.sh")
    pkgs = set(m.group(1).split())
    pkgs |= set(re.findall(r"DEBS\+=\(([\w.+-]+)\)", text))  # nodejs / npm when absent
    return pkgs


def read_status():
    """Installed packages: name -> {depends: [[alternatives]], essential: bool}; and provides."""
    pkgs, provides = {}, {}
    for block in open(os.path.join(DPKG, "status"), encoding="utf-8", errors="replace").read().split("\n\n"):
        fields, key = {}, None
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        name = fields.get("Package")
        if not name or "installed" not in fields.get("Status", "").split():
            continue
        deps = []
        for field in ("Depends", "Pre-Depends"):
            for group in filter(None, (g.strip() for g in fields.get(field, "").split(","))):
                deps.append([re.sub(r"[\s(:].*", "", alt.strip()) for alt in group.split("|")])
        pkgs[name] = {"depends": deps, "essential": fields.get("Essential") == "yes"}
        for p in filter(None, (x.strip() for x in fields.get("Provides", "").split(","))):
            provides.setdefault(re.sub(r"[\s(:].*", "", p), []).append(name)
    return pkgs, provides


def closure(roots, pkgs, provides):
    """Every installed package reached from roots through Depends / Pre-Depends."""
    seen, stack = set(), [r for r in roots if r in pkgs]
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        for alts in pkgs[p]["depends"]:
            for a in alts:  # every installed alternative (or provider) may be the one in use
                for q in ([a] if a in pkgs else []) + provides.get(a, []):
                    if q not in seen:
                        stack.append(q)
    return seen


def file_owners():
    """Path -> owning packages, from dpkg's file lists (dpkg -S, without a process per file)."""
    owners = {}
    for lst in glob.glob(os.path.join(DPKG, "info", "*.list")):
        pkg = os.path.basename(lst)[:-5].split(":")[0]
        with open(lst, encoding="utf-8", errors="replace") as f:
            for line in f:
                owners.setdefault(line.rstrip("\n"), set()).add(pkg)
    return owners


def owner_of(path, owners):
    """The packages owning path, trying the merged-/usr spellings and the resolved link."""
    candidates = [path, os.path.realpath(path)]
    for p in list(candidates):
        if p.startswith("/usr/lib/") or p.startswith("/usr/bin/") or p.startswith("/usr/sbin/"):
            candidates.append(p[4:])
        elif p.startswith(("/lib/", "/lib64/", "/bin/", "/sbin/")):
            candidates.append("/usr" + p)
    for p in candidates:
        if p in owners:
            return owners[p]
    return set()


def ours(path, build):
    p = os.path.realpath(path)
    return p.startswith(os.path.realpath(build) + os.sep) or p.startswith(REPO + os.sep) or p.startswith("/tmp/")


def cache_files(build):
    """(file, why) for what CMakeCache.txt names."""
    out = []
    for line in open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8", errors="replace"):
        m = re.match(r"^([A-Za-z0-9_.+-]+):(\w+)=(.*)$", line.rstrip("\n"))
        if not m:
            continue
        key, value = m.group(1), m.group(3)
        for v in value.split(";"):
            if not v.startswith("/"):
                continue
            if os.path.isfile(v):
                out.append((v, "CMakeCache " + key))
            elif key.endswith("_DIR") and os.path.isdir(v):
                for f in sorted(glob.glob(os.path.join(v, "*.cmake"))):
                    out.append((f, "find_package via " + key))
    return out


def depend_files(build):
    """(header, why) for every absolute path in the build's compiler dependency files."""
    out, seen = [], set()
    # GCC's own .o.d files (-MD) hold every object's headers; CMake's compiler_depend.make
    # gathers them during a build but is emptied again by a re-configure.
    for dep in glob.glob(os.path.join(build, "**", "*.o.d"), recursive=True) + \
            glob.glob(os.path.join(build, "**", "compiler_depend.make"), recursive=True):
        for token in open(dep, encoding="utf-8", errors="replace").read().split():
            token = token.rstrip(":\\")
            if token.startswith("/") and token not in seen and os.path.isfile(token):
                seen.add(token)
                out.append((token, "included by the build"))
    return out


def ldd_files(build):
    out, seen = [], set()
    for exe in sorted(glob.glob(os.path.join(build, "*"))):
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)) or exe.endswith((".sh", ".py")):
            continue
        r = subprocess.run(["ldd", exe], capture_output=True, text=True)
        for m in re.finditer(r"=>\s+(/\S+)", r.stdout):
            if m.group(1) not in seen:
                seen.add(m.group(1))
                out.append((m.group(1), "loaded by " + os.path.basename(exe)))
    return out


def script_files():
    out = []
    for prog in PROGRAMS:
        path = shutil.which(prog)
        out.append((path or prog, "program " + prog))
    out += [(d, "data") for d in DATA]
    for mod in PY_MODULES:
        r = subprocess.run(["/usr/bin/python3", "-c", f"import {mod}; print({mod}.__file__)"],
                           capture_output=True, text=True)
        out.append((r.stdout.strip() or f"python3 module {mod}", f"python3 module {mod}"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="the configured and built tree (default build)")
    ap.add_argument("--without", action="append", default=[],
                    help="check as if this package were not in setup.sh's list (the self-test)")
    ap.add_argument("--expect-missing", action="store_true",
                    help="succeed only if the check fails naming every --without package")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    if not os.path.isfile(os.path.join(build, "CMakeCache.txt")):
        sys.exit(f"check_deps: {build} is not a configured build tree (no CMakeCache.txt)")

    listed = setup_packages() - set(a.without)
    pkgs, provides = read_status()
    allowed = closure(listed, pkgs, provides) | {p for p, v in pkgs.items() if v["essential"]}
    owners = file_owners()

    problems, image, checked, seen = [], set(), 0, set()
    for path, why in cache_files(build) + depend_files(build) + ldd_files(build) + script_files():
        if path in seen:
            continue
        seen.add(path)
        if not path.startswith("/"):
            problems.append(f"{path} ({why}): not found on this machine")
            continue
        if ours(path, build):
            continue
        if path.startswith(IMAGE_PREFIXES) or os.path.realpath(path).startswith(IMAGE_PREFIXES):
            image.add(os.path.realpath(path).split("/")[3] if path.count("/") > 3 else path)
            continue
        checked += 1
        owned = owner_of(path, owners)
        if not owned:
            problems.append(f"{path} ({why}): no Debian package owns it")
        elif not owned & allowed:
            problems.append(f"{path} ({why}): from {', '.join(sorted(owned))}, which scripts/setup.sh "
                            "neither installs nor reaches through Depends")

    print(f"check_deps: {checked} files checked against {len(listed)} listed packages "
          f"({len(allowed)} with their Depends and the essential set); from the machine image, "
          f"not Debian: {', '.join(sorted(image)) or 'none'}")
    for p in problems:
        print("check_deps: " + p)
    if a.expect_missing:
        missed = [w for w in a.without if not any(f"from {w}" in p or f", {w}" in p for p in problems)]
        if missed or not a.without:
            print(f"check_deps: SELF-TEST FAILED: removing {', '.join(missed or ['(nothing)'])} from the list "
                  "went unnoticed")
            return 1
        print(f"check_deps: self-test ok: without {', '.join(a.without)} the check fails as it should")
        return 0
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
