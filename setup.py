"""Packaging for msprobe: `pip install -e ".[all,test]"` for development."""
import os
import re

from setuptools import Extension, find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "msprobe", "__init__.py"), encoding="utf-8") as handle:
    VERSION = re.search(r'__version__ = "([^"]+)"', handle.read()).group(1)
with open(os.path.join(HERE, "README.md"), encoding="utf-8") as handle:
    LONG_DESCRIPTION = handle.read()

BASE = ["numpy>=1.21", "pandas>=1.3", "openpyxl>=3.0", "pyyaml>=5.4", "tqdm>=4.60", "orjson>=3.6", "rich>=12"]
EXTRAS = {
    # the tested range (README "Versions"): the full suite on 2.13, CI's smoke job on the oldest and the newest
    "pytorch": ["torch>=2.6,<2.16"],
    "mindspore": ["mindspore>=2.4", "numpy<2"],
    "test": ["pytest>=7", "pytest-timeout>=2", "ruff>=0.6", "mypy>=1.8", "transformers>=5", "tensorboard>=2.10",
             "tb-graph-ascend", "matplotlib>=3.5", "cryptography>=3.4", "safetensors>=0.4", "accelerate>=0.26",
             "lightning>=2.0", "duckdb>=0.9", "ray>=2.9"],
    # whole-job analyses: the trend store (trend.duckdb) and its heatmaps
    "trend": ["duckdb>=0.9", "matplotlib>=3.5"],
    # whole-job compare on an existing Ray cluster (--engine ray)
    "ray": ["ray>=2.9"],
    # ISA-L's deflate for the xlsx reports (4x zlib's speed at level 1); optional: without it zlib deflates
    "fast": ["isal>=1.0"],
}
EXTRAS["all"] = sorted(set(EXTRAS["pytorch"] + EXTRAS["mindspore"] + EXTRAS["fast"]))
# one-pass tensor statistics for the dump; optional: without a C compiler msprobe uses framework kernels
# (-pthread: long buffers are reduced on a small pool of threads)
# msprobe/_native: kernels over buffers only, one interface version (msprobe._native.VERSION)
FAST_STATS = Extension("msprobe._native._stats", ["msprobe/_native/_stats.c"], optional=True,
                       depends=["msprobe/_native/common.h"],
                       extra_compile_args=[] if os.name == "nt" else ["-O3", "-pthread"],
                       extra_link_args=[] if os.name == "nt" else ["-pthread"])
# one-pass error metrics of a device output against its bench (online_dispatch's judge); optional likewise
PAIR_KERNELS = Extension("msprobe._native._pair", ["msprobe/_native/_pair.c"], optional=True,
                         depends=["msprobe/_native/common.h"],
                         extra_compile_args=[] if os.name == "nt" else ["-O3"])

setup(
    name="msprobe",
    version=VERSION,
    description="Find where a deep-learning training run loses numerical accuracy (PyTorch and MindSpore).",
    long_description=LONG_DESCRIPTION,
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    # the Python versions CI runs the whole suite on (README "Versions"); tests/test_python_versions.py keeps these,
    # the classifiers and README in step
    python_requires=">=3.11,<3.12",
    packages=find_packages(include=["msprobe", "msprobe.*"]),
    package_data={"msprobe": ["config.json", "**/*.yaml", "**/*.json", "**/*.html", "**/*.js", "**/*.css", "_native/*.h"]},
    include_package_data=True,
    ext_modules=[FAST_STATS, PAIR_KERNELS],
    install_requires=BASE,
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["msprobe=msprobe.cli:console_main"]},
    classifiers=["Programming Language :: Python :: 3", "Programming Language :: Python :: 3 :: Only",
                 "Programming Language :: Python :: 3.11", "License :: OSI Approved :: Apache Software License"],
)
