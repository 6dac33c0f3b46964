# evalgrid weirdml provenance probe: interpreter facts and package versions (from
# metadata, without importing the packages), printed as one JSON line.
import importlib.metadata
import importlib.util
import json
import os
import site
import sys

PACKAGES = [
    ("numpy", "numpy"),
    ("torch", "torch"),
    ("torchvision", "torchvision"),
    ("scipy", "scipy"),
    ("pandas", "pandas"),
    ("sklearn", "scikit-learn"),
    ("PIL", "Pillow"),
]


def version(module, dist):
    try:
        if importlib.util.find_spec(module) is None:
            return None
    except Exception:
        return None
    try:
        return importlib.metadata.version(dist)
    except Exception:
        return "unknown"


paths = [p for p in sys.path if p and os.path.isabs(p) and os.path.isdir(p)]
user_site = None
if site.ENABLE_USER_SITE:
    us = site.getusersitepackages()
    if os.path.isdir(us):
        user_site = us
info = {
    "executable": sys.executable,
    "real_executable": os.path.realpath(sys.executable),
    "version": sys.version.split()[0],
    "implementation": sys.implementation.name,
    "prefix": sys.prefix,
    "base_prefix": sys.base_prefix,
    "exec_prefix": sys.exec_prefix,
    "paths": paths,
    "user_site": user_site,
    "packages": {dist: version(mod, dist) for mod, dist in PACKAGES},
}
print("EVALGRID-PROBE " + json.dumps(info, sort_keys=True))
