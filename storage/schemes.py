"""The registry of storage schemes: which driver serves which URI.

:func:`storage.open_storage` reads this table, and so do everything else that needs a
driver from a URI (the options a driver takes, checked before Ray starts; the package a
missing SDK comes from; the schemes an error lists). Adding a backend is one module
(``storage/<name>.py``, a :class:`~storage.base.Storage` subclass) plus one
:func:`register_scheme` call (the built-in ones are in ``storage/__init__.py``; a
driver outside this package makes its own); ``tests/storage/test_schemes.py`` then
fails until a contract test class covers the new scheme.

A driver is named by ``"module:Class"`` and imported on first use, so that importing
``storage`` never loads an SDK a run does not use.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Literal

from .base import Storage
from .errors import MissingDriver, UnsupportedURI

__all__ = ["Scheme", "driver_class", "register_scheme", "scheme_named", "schemes"]


@dataclass(frozen=True)
class Scheme:
    """One URI scheme and its driver.

    ``form`` says what the driver's constructor takes before its keyword options: a
    ``"path"`` (``Driver(path)``: plain paths and ``file://``) or a ``"bucket"`` and a
    prefix (``Driver(bucket, prefix)``: ``scheme://bucket/prefix``, no query string).
    ``extra`` is the ``pip install 'trialflow[extra]'`` that brings the driver's SDK
    (``None``: nothing to install); ``endpoint_hint`` says, for a bucket scheme, how to
    point at another endpoint (shown when a URI carries one in a query string, as
    pyarrow's do)."""

    name: str
    driver: str  # "module:Class", imported on first use
    form: Literal["path", "bucket"] = "bucket"
    extra: str | None = None
    endpoint_hint: str = "the driver's options"

    @property
    def class_name(self) -> str:
        return self.driver.partition(":")[2]


#: Every registered scheme by name (``storage/__init__.py`` registers the built-in ones).
_SCHEMES: dict[str, Scheme] = {}


def register_scheme(scheme: Scheme) -> None:
    """Serve ``scheme.name://`` URIs with ``scheme.driver`` (replacing a registered one
    of that name). The driver is imported when such a URI is first opened."""
    if not scheme.name.isascii() or not scheme.name.isalnum() or scheme.name != scheme.name.lower():
        raise ValueError(f"a scheme name is lowercase letters and digits, got {scheme.name!r}")
    module, _, name = scheme.driver.partition(":")
    if not module or not name:
        raise ValueError(f"a driver is named 'module:Class', got {scheme.driver!r}")
    _SCHEMES[scheme.name] = scheme


def schemes() -> tuple[Scheme, ...]:
    """Every registered scheme, in the order registered (built-in ones first)."""
    return tuple(_SCHEMES.values())


def scheme_named(name: str, uri: str) -> Scheme:
    """The registered scheme ``name`` (of ``uri``, which the error names)."""
    try:
        return _SCHEMES[name]
    except KeyError:
        *others, last = (f"{s.name}://" for s in _SCHEMES.values())
        known = f"{', '.join(others)} or {last}" if others else last
        raise UnsupportedURI(
            f"unknown storage scheme {name!r} in {uri!r}; use a path, {known}"
        ) from None


def driver_class(scheme: Scheme, uri: str = "") -> type[Storage]:
    """The driver class of ``scheme``, imported now; :class:`MissingDriver` (naming
    ``uri`` and what to install) when its SDK is not installed."""
    module, _, name = scheme.driver.partition(":")
    try:
        driver = getattr(importlib.import_module(module), name)
    except ImportError as err:
        install = f"pip install 'trialflow[{scheme.extra}]'" if scheme.extra else "install it"
        raise MissingDriver(
            f"{scheme.name}:// storage needs packages that are not installed ({err}): {install}",
            uri=uri,
        ) from err
    if not (isinstance(driver, type) and issubclass(driver, Storage)):
        raise UnsupportedURI(f"{scheme.driver} (for {scheme.name}://) is not a Storage class")
    return driver
