"""Is Triton (PyTriton) usable here?  Only the `triton` extra installs it, and its wheels exist only for
Linux x86_64/aarch64 with glibc >= 2.35 (`make setup` adds the extra there, see scripts/install.py).
Elsewhere notebook 08 and the tests serve through `labkit serve api --backend ort` (the API's in-process
ONNX Runtime micro-batcher) instead of Triton.
"""

from __future__ import annotations

import importlib.util

# what `labkit serve triton` (pytriton) and the API's TritonBackend (tritonclient's asyncio HTTP client) import
TRITON_MODULES = ("pytriton", "tritonclient", "aiohttp")


def triton_missing() -> str | None:
    """Why Triton cannot be used here (an installable fix included), or None when it can."""
    missing = [m for m in TRITON_MODULES if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    return (
        f"Triton is not installed ({', '.join(missing)} missing): pip install -e '.[triton]' "
        f"(wheels only for Linux x86_64/aarch64 with glibc >= 2.35)"
    )


def triton_available() -> bool:
    """True when PyTriton and the Triton client can be imported (nothing is started or imported here)."""
    return triton_missing() is None
