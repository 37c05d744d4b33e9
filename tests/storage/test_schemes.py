"""The registry of storage schemes: every registered driver is held to the contract,
and a driver registered in one place is what ``open_storage``, the pre-Ray option
check and the errors see."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

import storage
from orchestrator.errors import ConfigError
from orchestrator.journal.storage_check import open_checked
from storage import LocalStorage, MissingDriver, Scheme, UnsupportedURI, open_storage
from storage.schemes import _SCHEMES, driver_class, register_scheme, schemes

HERE = Path(__file__).resolve().parent


def contract_schemes() -> dict[str, str]:
    """``scheme`` -> the test class that runs the storage contract on it, read from the
    test modules' source (a test module does not import another)."""
    covered: dict[str, str] = {}
    for path in HERE.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            if "StorageContract" not in {getattr(b, "id", None) for b in node.bases}:
                continue
            for stmt in node.body:
                if (
                    isinstance(stmt, ast.Assign)
                    and [getattr(t, "id", None) for t in stmt.targets] == ["scheme"]
                    and isinstance(stmt.value, ast.Constant)
                ):
                    covered[str(stmt.value.value)] = f"{path.name}::{node.name}"
    return covered


def test_every_registered_scheme_runs_the_storage_contract() -> None:
    covered = contract_schemes()
    missing = [s.name for s in schemes() if s.name not in covered]
    assert not missing, (
        f"schemes {missing} have no StorageContract subclass in tests/storage/ "
        "(class TestX(StorageContract): scheme = '...')"
    )


def test_a_driver_exported_by_storage_is_typed_and_loaded_from_the_registry() -> None:
    """``from storage import S3Storage``, typed (the type-only imports) and at run time
    (the lazy loader reads the registry); the built-in drivers are all exported."""
    tree = ast.parse(Path(storage.__file__).read_text())
    typed = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
        for stmt in node.body
        if isinstance(stmt, ast.ImportFrom)
        for alias in stmt.names
    }
    exported = [s for s in schemes() if s.class_name in storage.__all__]
    assert {s.name for s in exported} >= {"file", "s3", "gs"}
    for scheme in exported:
        name = scheme.class_name
        assert name in typed or name in vars(storage), name
        assert getattr(storage, name) is driver_class(scheme)


class ToyStorage(LocalStorage):
    """A bucket-form driver kept in a local directory (``toy://bucket/prefix``)."""

    def __init__(self, bucket: str, prefix: str = "", *, toy_root: str, **options: Any):
        super().__init__(f"{toy_root}/{bucket}/{prefix}", **options)
        self.bucket = bucket


@pytest.fixture
def toy_scheme() -> Any:
    register_scheme(Scheme("toy", f"{__name__}:ToyStorage", endpoint_hint="toy_root="))
    yield
    del _SCHEMES["toy"]


@pytest.mark.usefixtures("toy_scheme")
async def test_a_scheme_registered_once_is_seen_everywhere(tmp_path: Path) -> None:
    store = open_storage("toy://bucket/runs", toy_root=str(tmp_path), create=True)
    assert isinstance(store, ToyStorage)
    async with store:
        await store.write_bytes("k", b"v")
    assert (tmp_path / "bucket" / "runs" / "k").read_bytes() == b"v"
    # The option check before Ray names the options this driver takes.
    with pytest.raises(ConfigError, match="'nope'.*toy_root"):
        open_checked("toy://bucket/runs", {"toy_root": str(tmp_path), "nope": 1}, "exp")
    # Errors list it, and apply its form.
    with pytest.raises(UnsupportedURI, match="toy://"):
        open_storage("ftp://host/runs")
    with pytest.raises(UnsupportedURI, match="another endpoint in toy_root="):
        open_storage("toy://bucket?x=1", toy_root=str(tmp_path))


def test_a_driver_whose_sdk_is_missing_says_what_to_install() -> None:
    register_scheme(Scheme("absent", "storage_absent_sdk:Driver", extra="absent"))
    try:
        with pytest.raises(MissingDriver, match=r"pip install 'trialflow\[absent\]'"):
            open_storage("absent://bucket/x")
    finally:
        del _SCHEMES["absent"]


def test_a_bad_registration_is_refused() -> None:
    with pytest.raises(ValueError, match="module:Class"):
        register_scheme(Scheme("bad", "storage.local"))
    with pytest.raises(ValueError, match="lowercase"):
        register_scheme(Scheme("Bad", "storage.local:LocalStorage"))
