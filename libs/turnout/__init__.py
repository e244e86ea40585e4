"""Turnout, the library: the pure core (`core`), its shell (`router`, `health`), the adapters, the Redis edge (`state`) and the wings (`tenancy`, `observability`, `streaming`, `catalog`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module


def lazy_face(package: str, face: Mapping[str, str]) -> Callable[[str], object]:
    """A package's module-level `__getattr__` (PEP 562) re-exporting names from its modules.

    `face` maps a public name to the module of `package` that defines it
    (`{"Identity": "identity"}`); the module is imported on first access, so
    importing one module of a package never loads its siblings. Raises
    `AttributeError` for a name not in `face`, as any module does.
    """

    def __getattr__(name: str) -> object:
        if name not in face:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f"{package}.{face[name]}"), name)

    return __getattr__
