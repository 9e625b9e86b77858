"""Programs run by the legacy runtime's interpreter (Python 3.9+, standard library first).

They print one JSON line starting with :data:`RESULT_PREFIX`, so that whatever a framework
prints on import cannot be mistaken for the answer.
"""

from __future__ import annotations

import json
from typing import Any

from dltune._errors import DltuneError

__all__ = ["INSPECT", "PROBE", "RESULT_PREFIX", "parse_result"]

RESULT_PREFIX = "DLTUNE-RESULT "

# argv[1:]: distribution names (equal to their import names for every legacy pin).
# A package counts as broken when it is not importable or a file its RECORD lists is gone,
# which catches a deleted package folder that pip itself would call "already satisfied".
INSPECT = """
import importlib.metadata as md, importlib.util, json, os, sys, sysconfig
out = {"version": "%d.%d.%d" % sys.version_info[:3],
       "purelib": sysconfig.get_paths()["purelib"], "packages": {}}
for name in sys.argv[1:]:
    info = {"version": None, "importable": False, "missing_files": 0}
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        out["packages"][name] = info
        continue
    info["version"] = dist.version
    info["importable"] = importlib.util.find_spec(name) is not None
    info["missing_files"] = sum(
        1 for f in (dist.files or ())
        if f.suffix != ".pyc" and not os.path.exists(dist.locate_file(f)))
    out["packages"][name] = info
print("DLTUNE-RESULT " + json.dumps(out))
"""

# argv[1:]: module names to import. THEANO_FLAGS comes from the environment.
PROBE = """
import json, sys, traceback, warnings
warnings.simplefilter("ignore")
out = {"versions": {"python": "%d.%d.%d" % sys.version_info[:3]}, "errors": {}, "details": {}}
for name in sys.argv[1:]:
    try:
        module = __import__(name)
        out["versions"][name] = str(getattr(module, "__version__", "unknown"))
    except BaseException as exc:
        out["errors"][name] = traceback.format_exception_only(type(exc), exc)[-1].strip()
if "theano" in out["versions"]:
    import theano
    out["details"]["theano_cxx"] = theano.config.cxx
    out["details"]["theano_blas_ldflags"] = theano.config.blas.ldflags
    out["details"]["theano_compiledir"] = theano.config.compiledir
print("DLTUNE-RESULT " + json.dumps(out))
"""


def parse_result(stdout: str, what: str) -> dict[str, Any]:
    """The JSON object on the last result line of ``stdout``.

    Raises:
        DltuneError: no result line (the program crashed before printing one).
    """
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX) :])
    raise DltuneError(f"The legacy runtime's {what} printed no result.")
