"""crest.Config: a run config validated by crest itself, read by attribute."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from . import _crest


class Section(Mapping):
    """A read-only section of a resolved config: ``config.data.batch_size`` or ``["batch_size"]``.

    Change a value with an override (``Config.load(path, overrides=["data.batch_size=4"])`` or
    ``config.with_overrides(...)``): crest validates every change as the CLI does.
    """

    def __init__(self, path: str, values: Mapping[str, Any]):
        self._path = path
        self._values = values

    def __getitem__(self, key: str) -> Any:
        value = self._values[key]
        return Section(f"{self._path}.{key}", value) if isinstance(value, Mapping) else value

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"config section '{self._path}' has no key '{key}'") from None

    def __setattr__(self, key: str, value: Any) -> None:
        if key.startswith("_"):
            return object.__setattr__(self, key, value)
        raise AttributeError(
            f"configs are read-only: use with_overrides('{self._path}.{key}=...') instead")

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Section({self._path!r}, {dict(self._values)!r})"


class Config:
    """A validated run config: every key of the file, the overrides applied, defaults spelled out.

    Errors raise crest.InputError or crest.UsageError with the CLI's message (file, line, key)
    and its exit code (``exc.exit_code``).
    """

    def __init__(self, native: _crest.NativeConfig):
        self._native = native
        self._sections = native.to_dict()

    @classmethod
    def load(cls, path: str | os.PathLike, overrides: Iterable[str] = ()) -> "Config":
        """Loads a YAML run config (as ``crest train --config``) with key.path=value overrides."""
        return cls(_crest.load_config(os.fspath(path), list(overrides)))

    @classmethod
    def from_yaml(cls, text: str, overrides: Iterable[str] = (),
                  source: str = "<python>") -> "Config":
        """The same from YAML text; ``source`` names it in error messages."""
        return cls(_crest.load_config_text(text, source, list(overrides)))

    def with_overrides(self, *overrides: str) -> "Config":
        """A new config: this one's resolved values with more key.path=value overrides."""
        return Config(_crest.load_config_text(self.dump(), self.source, list(overrides)))

    def dump(self) -> str:
        """The resolved config as YAML; ``Config.from_yaml(c.dump())`` gives the same config."""
        return self._native.resolved_yaml

    def to_dict(self) -> dict:
        """The resolved config as nested dicts and lists."""
        return self._native.to_dict()

    @property
    def source(self) -> str:
        return self._native.source

    @property
    def overrides(self) -> list[str]:
        return list(self._native.overrides)

    @property
    def output_dir(self) -> str:
        """Where a run of this config writes its checkpoints and records."""
        return self._native.output_dir

    def __getattr__(self, section: str) -> Any:
        sections = self.__dict__.get("_sections", {})
        if section in sections:
            value = sections[section]
            return Section(section, value) if isinstance(value, Mapping) else value
        raise AttributeError(f"the config has no section '{section}'")

    def __repr__(self) -> str:
        return f"crest.Config({self.source!r}, overrides={self.overrides!r})"
