"""PEP 517 build (setuptools.build_meta) of the ortmlx wheels, which carry libortmlx.so.

One source tree, two distributions, chosen by ORTMLX_FLAVOUR:
    cpu  (default)  ortmlx-cpu    depends on mlx-cpu       (requirements.txt)
    cuda            ortmlx-cu13   depends on mlx-cuda-13   (requirements-cuda.txt)
The MLX and scipy-openblas32 pins are read from those requirement files, so the wheel asks for
exactly the versions the library was built and tested against. onnxruntime is not a dependency
(ORT's plugin-EP packaging guidance): users install onnxruntime or onnxruntime-gpu themselves.

The library comes from a CMake build tree: ORTMLX_BUILD_DIR (an existing tree, e.g. `build`,
which `make wheel` passes so nothing is compiled twice) or build-wheel/<flavour>/cmake,
configured here with ORTMLX_CMAKE_ARGS when it has no CMakeCache.txt yet. `cmake --install
--strip` of the component ortmlx_wheel then puts it in ortmlx/lib with its $ORIGIN-relative
RUNPATH.

The platform tag is computed from the library itself: manylinux_2_N with N the newest glibc
symbol version it needs, raised to the glibc of the oldest manylinux baseline whose libstdc++
provides the newest GLIBCXX version it needs (auditwheel's policy); `auditwheel show` on the
result agrees (README, Install).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution
from wheel.bdist_wheel import bdist_wheel

ROOT = Path(__file__).resolve().parent
FLAVOURS = {
    "cpu": ("ortmlx-cpu", "requirements.txt", "mlx-cpu", "MLX's CPU backend"),
    "cuda": ("ortmlx-cu13", "requirements-cuda.txt", "mlx-cuda-13", "MLX's CUDA 13 backend"),
}
FLAVOUR = os.environ.get("ORTMLX_FLAVOUR", "cpu")
if FLAVOUR not in FLAVOURS:
    sys.exit(f"ORTMLX_FLAVOUR must be one of {', '.join(FLAVOURS)}, not '{FLAVOUR}'")
NAME, REQUIREMENTS, MLX_DIST, BACKEND = FLAVOURS[FLAVOUR]
LIBRARY = "ortmlx/lib/libortmlx.so"
STAGING = ROOT / "build-wheel" / FLAVOUR  # git-ignored: setuptools' and CMake's working files

# (newest GLIBCXX_3.4.N, glibc minor of the manylinux baseline providing it), oldest first:
# the libstdc++ symbol versions of auditwheel's manylinux policy.
GLIBCXX_BASELINES = ((8, 5), (13, 12), (19, 17), (22, 24), (24, 27), (28, 31), (29, 34), (30, 35),
                     (33, 39))


def pins() -> dict[str, str]:
    """name -> requirement line of the flavour's requirement files (following -r)."""
    out: dict[str, str] = {}

    def read(path: Path):
        for line in path.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("-r"):
                read(path.parent / line[2:].strip())
            elif line:
                out[re.split(r"[=<>!~ ]", line, 1)[0].lower()] = line

    read(ROOT / REQUIREMENTS)
    return out


def version() -> str:
    text = (ROOT / "python" / "ortmlx" / "__init__.py").read_text()
    return re.search(r'^__version__ = "([^"]+)"', text, re.M).group(1)


def manylinux_tag(library: Path) -> str:
    """manylinux_2_N_<arch> from the symbol versions `library` needs (readelf -V)."""
    text = subprocess.run(["readelf", "-V", "--wide", str(library)], capture_output=True,
                          text=True, check=True).stdout
    glibc = [int(m) for m in re.findall(r"Name: GLIBC_2\.(\d+)", text)]
    glibcxx = [int(m) for m in re.findall(r"Name: GLIBCXX_3\.4\.(\d+)", text)]
    need = max(glibc, default=17)
    if glibcxx:
        newest = max(glibcxx)
        baseline = next((g for n, g in GLIBCXX_BASELINES if n >= newest), None)
        if baseline is None:
            return f"linux_{os.uname().machine}"  # newer than any baseline: no manylinux claim
        need = max(need, baseline)
    return f"manylinux_2_{need}_{os.uname().machine}"


class BuildPyWithLibrary(build_py):
    """Builds (or reuses) libortmlx.so with CMake and installs it into the package tree."""

    def run(self):
        super().run()
        build_dir = Path(os.environ.get("ORTMLX_BUILD_DIR") or STAGING / "cmake")
        jobs = os.environ.get("ORTMLX_JOBS", str(os.cpu_count() or 2))
        if not (build_dir / "CMakeCache.txt").is_file():
            args = shlex.split(os.environ.get("ORTMLX_CMAKE_ARGS", ""))
            self._cmake("-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                        "-DORTMLX_BUILD_TESTS=OFF", *args)
        self._cmake("--build", str(build_dir), "--target", "ortmlx", "-j", jobs)
        self._cmake("--install", str(build_dir), "--component", "ortmlx_wheel", "--strip",
                    "--prefix", str(Path(self.build_lib).resolve()))
        if not (Path(self.build_lib) / LIBRARY).is_file():
            raise RuntimeError(f"cmake --install did not produce {LIBRARY}")

    @staticmethod
    def _cmake(*args):
        print("cmake", " ".join(args), flush=True)
        subprocess.run(["cmake", *args], check=True)


class BdistWheelTagged(bdist_wheel):
    """Any Python 3 (the package has no extension module), the platform the library needs."""

    def get_tag(self):
        lib = Path(self.get_finalized_command("build_py").build_lib) / LIBRARY
        if not lib.is_file():
            return super().get_tag()
        return "py3", "none", manylinux_tag(lib)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True  # platform wheel, installed into platlib


req = pins()
STAGING.mkdir(parents=True, exist_ok=True)
setup(
    name=NAME,
    version=version(),
    description=f"MLX execution provider for ONNX Runtime, plugin library on {BACKEND}",
    long_description=(ROOT / "README.md").read_text(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=["ortmlx"],
    package_dir={"": "python"},
    install_requires=[req[MLX_DIST], req["scipy-openblas32"], "numpy", "onnx"],
    cmdclass={"build_py": BuildPyWithLibrary, "bdist_wheel": BdistWheelTagged},
    distclass=BinaryDistribution,
    options={"build": {"build_base": str(STAGING / "setuptools")},
             "egg_info": {"egg_base": str(STAGING)}},
    zip_safe=False,
)
