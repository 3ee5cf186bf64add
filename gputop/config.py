"""The configuration file (its format: README, "Configuration"; ``[fleet]``: docs/fleet.md).

A missing default file is no error; a file named explicitly must exist.
"""

from __future__ import annotations

import dataclasses
import math
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputop.analysis.thresholds import ThresholdError, Thresholds
from gputop.argtypes import MAX_INTERVAL as MAX_INTERVAL  # re-exported for the commands
from gputop.argtypes import MIN_INTERVAL as MIN_INTERVAL
from gputop.argtypes import echo, shorten
from gputop.fmt import clean_text
from gputop.keys import KEYS, RESERVED, canonical_key

DEFAULT_INTERVAL = 1.0
#: A settings file is a few hundred bytes: larger is refused.
MAX_CONFIG_BYTES = 1 << 20

_KEYS = ("readonly", "interval", "window", "theme", "thresholds", "fleet", "keys")
_FLEET_KEYS = ("hosts", "remote_command", "ssh_config")


class ConfigError(ValueError):
    """A configuration that cannot be used (one line for people)."""


@dataclass(frozen=True, slots=True)
class Config:
    """The settings of the config file, checked (docs/configuration.md)."""

    readonly: bool = False
    interval: float = DEFAULT_INTERVAL
    thresholds: Thresholds = field(default_factory=Thresholds)
    theme: str | None = None  # None: the dashboard's default
    fleet_hosts: tuple[str, ...] = ()  # [fleet] hosts
    fleet_remote_command: str | None = None  # [fleet] remote_command (None: "gputop")
    fleet_ssh_config: str | None = None  # [fleet] ssh_config (None: ssh's own)
    keys: tuple[tuple[str, str], ...] = ()  # [keys]: (action, key) the user moved


def default_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME", "")
    if not base or not os.path.isabs(base):  # the XDG spec ignores relative paths
        home = env.get("HOME") or os.path.expanduser("~")
        base = os.path.join(home, ".config")
    return Path(base) / "gputop" / "config.toml"


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join((clean_text(text, limit) or "").split())


#: Room for a threshold error: it names every known threshold, none may be cut off.
_THRESHOLD_ERROR_LIMIT = 2000


def load_config(path: str | None = None, environ: Mapping[str, str] | None = None) -> Config:
    explicit = path is not None
    file = Path(path) if path is not None else default_path(environ)
    shown = shorten(file)
    try:
        raw = _read_regular_file(file, shown)
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"config file not found: {shown}") from None
        return Config()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {shown}: {exc.strerror or exc}") from None
    import tomllib  # only when there is a file: most starts have none

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{shown}: not valid TOML: {_one_line(str(exc))}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{shown}: not valid TOML: not UTF-8 text") from None
    except RecursionError:  # arrays or tables nested thousands deep
        raise ConfigError(f"{shown}: not valid TOML: nested too deeply") from None
    try:
        return _from_mapping(data)
    except ConfigError as exc:
        raise ConfigError(f"{shown}: {exc}") from None


def _read_regular_file(file: Path, shown: str) -> bytes:
    """At most :data:`MAX_CONFIG_BYTES` of a regular file, opened without blocking (a FIFO
    or ``/dev/zero`` is refused, not waited on or read for ever)."""
    fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise ConfigError(f"config file {shown} is {what}")
        os.set_blocking(fd, True)
        with open(fd, "rb", closefd=False) as f:
            data = f.read(MAX_CONFIG_BYTES + 1)  # buffered: up to that many bytes or EOF
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file {shown} is too big (over {MAX_CONFIG_BYTES} bytes)")
    return data


def _number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{key} must be a number of seconds, not {_shown(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise ConfigError(f"{key} must be a finite number, not {_shown(value)}")
    return number


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return echo(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return shorten(repr(value))


def _interval(value: Any, key: str = "interval") -> float:
    number = _number(key, value)
    if not MIN_INTERVAL <= number <= MAX_INTERVAL:
        raise ConfigError(
            f"{key} = {number:g} is out of range: seconds from {MIN_INTERVAL:g} to {MAX_INTERVAL:g}"
        )
    return number


def _window(value: Any, key: str = "window") -> float:
    number = _number(key, value)
    if not number > 0:
        raise ConfigError(f"{key} = {number:g} must be above 0 seconds")
    return number


def _theme(value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"theme must be a string (a theme name), not {_shown(value)}")
    name = value.strip()
    if not name or len(name) > 64 or _one_line(name) != name:
        raise ConfigError(f"theme must be a theme name, not {_shown(value)}")
    return name


def _from_mapping(data: Mapping[str, Any]) -> Config:
    unknown = [k for k in data if k not in _KEYS]
    if unknown:
        raise ConfigError(
            f"unknown key {_shown(unknown[0])}; known: readonly, interval, window, theme, "
            "[thresholds], [fleet], [keys]"
        )
    readonly = data.get("readonly", False)
    if not isinstance(readonly, bool):
        raise ConfigError(f"readonly must be true or false, not {_shown(readonly)}")
    interval = _interval(data["interval"]) if "interval" in data else DEFAULT_INTERVAL
    theme = _theme(data["theme"]) if "theme" in data else None
    table = data.get("thresholds", {})
    if not isinstance(table, dict):
        raise ConfigError(f"thresholds must be a table ([thresholds]), not {_shown(table)}")
    for name, value in table.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(
                f"[thresholds] {shorten(name)}: expected a number, not {_shown(value)}"
            )
    try:
        thresholds = Thresholds.from_overrides(table)
    except ThresholdError as exc:
        raise ConfigError(f"[thresholds] {_one_line(str(exc), _THRESHOLD_ERROR_LIMIT)}") from None
    if "window" in data:
        window = _window(data["window"])
        if names_window(table) and thresholds.window_seconds != window:
            raise ConfigError(
                f"window = {window:g} and [thresholds] WINDOW_SECONDS = "
                f"{thresholds.window_seconds:g} disagree; set one of them"
            )
        thresholds = _with_window(thresholds, window)
    return Config(
        readonly=readonly,
        interval=interval,
        thresholds=thresholds,
        theme=theme,
        keys=_keys(data.get("keys", {})),
        **_fleet(data.get("fleet", {})),
    )


def names_window(names: Iterable[object]) -> bool:
    """Whether threshold ``names`` (either case, ``-`` or ``_``) hold WINDOW_SECONDS."""
    return any(str(n).strip().lower().replace("-", "_") == "window_seconds" for n in names)


def check_theme(config: Config) -> None:
    """ConfigError when the theme (from a flag or the file) is not one Textual knows."""
    theme = config.theme
    if theme is None:
        return
    from textual.theme import BUILTIN_THEMES  # only when a theme is asked for

    if theme not in BUILTIN_THEMES:
        raise ConfigError(
            f"--theme: unknown theme {echo(theme)} (from --theme or the config file); "
            f"known: {', '.join(sorted(BUILTIN_THEMES))}"
        )


def check_window(config: Config, *, explicit: bool = True) -> Config:
    """A window too short to leave "warming up" (under MIN_SECONDS or MIN_SAMPLES samples)
    raises ConfigError when ``explicit``; the default one is stretched instead."""
    t = config.thresholds
    window = t.window_seconds
    needed = t.min_samples * config.interval
    if not explicit and window < needed and window >= t.min_seconds:
        return dataclasses.replace(config, thresholds=_with_window(t, needed))
    if window < t.min_seconds:
        raise ConfigError(
            f"window of {window:g} s is shorter than MIN_SECONDS={t.min_seconds:g}: "
            "every verdict would stay at warming up"
        )
    if window < needed - 1e-9:
        raise ConfigError(
            f"window of {window:g} s holds fewer than MIN_SAMPLES={t.min_samples} samples "
            f"at {config.interval:g} s each (needs {needed:g} s): every verdict would stay "
            "at warming up"
        )
    return config


def _fleet(table: Any) -> dict[str, Any]:
    """``[fleet]``: the Config's ``fleet_`` fields."""
    if not isinstance(table, dict):
        raise ConfigError(f"fleet must be a table ([fleet]), not {_shown(table)}")
    unknown = [k for k in table if k not in _FLEET_KEYS]
    if unknown:
        raise ConfigError(
            f"[fleet] unknown key {_shown(unknown[0])}; known: {', '.join(_FLEET_KEYS)}"
        )
    hosts = table.get("hosts", [])
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise ConfigError(f"[fleet] hosts must be a list of host names, not {_shown(hosts)}")
    for h in hosts:
        if not h.strip() or h.strip() != h or _one_line(h) != h or h.startswith("-"):
            raise ConfigError(f"[fleet] hosts: {_shown(h)} is not a host name")
    out: dict[str, Any] = {"fleet_hosts": tuple(hosts)}
    for key in ("remote_command", "ssh_config"):
        value = out[f"fleet_{key}"] = table.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"[fleet] {key} must be a non-empty string, not {_shown(value)}")
    return out


def _keys(table: Any) -> tuple[tuple[str, str], ...]:
    """``[keys]``: action = key, each a key some key press produces (by Textual's names,
    :func:`gputop.keys.canonical_key`), free (not another action's, not reserved)."""
    if not isinstance(table, dict):
        raise ConfigError(f"keys must be a table ([keys]), not {_shown(table)}")
    names = [k.id for k in KEYS]

    def same(key: str) -> str:  # "?" and "question_mark" are one key
        return canonical_key(key) or key

    reserved = {same(key) for key in RESERVED}
    taken = {
        same(key): k.id
        for k in KEYS
        if k.id not in table
        for key in [*k.keys.split(","), k.display]
    }
    for name, key in table.items():
        if name not in names:
            raise ConfigError(f"[keys] unknown action {_shown(name)}; known: {', '.join(names)}")
        if not isinstance(key, str) or canonical_key(key) is None:
            raise ConfigError(
                f'[keys] {name} must be a key such as "h", "ctrl+o" or "f2", not {_shown(key)}'
                " (a key's name as Textual gives it)"
            )
        if same(key) in reserved:
            raise ConfigError(f"[keys] {name} = {key!r}: reserved ({', '.join(sorted(RESERVED))})")
        if same(key) in taken:
            raise ConfigError(f"[keys] {name} = {key!r} is already the key of {taken[same(key)]}")
        taken[same(key)] = name
    return tuple(table.items())


def _with_window(thresholds: Thresholds, window: float) -> Thresholds:
    try:
        return Thresholds.from_overrides({"window_seconds": window}, base=thresholds)
    except ThresholdError as exc:
        raise ConfigError(_one_line(str(exc), _THRESHOLD_ERROR_LIMIT)) from None


def with_overrides(
    config: Config,
    *,
    readonly: bool | None = None,
    interval: float | None = None,
    window: float | None = None,
    thresholds: Iterable[str] = (),
    theme: str | None = None,
) -> Config:
    """The configuration with the flags that were given (None: not given) on top;
    ``--window`` wins over any WINDOW_SECONDS. ConfigError names the flag, not the file."""
    changes: dict[str, Any] = {}
    if readonly is not None:
        changes["readonly"] = bool(readonly)
    if interval is not None:
        changes["interval"] = _interval(interval, "--interval")
    if theme is not None:
        changes["theme"] = _theme(theme)
    result = config.thresholds
    items = tuple(thresholds)
    if items:
        try:
            result = Thresholds.from_strings(items, base=result)
        except ThresholdError as exc:
            raise ConfigError(
                f"--threshold: {_one_line(str(exc), _THRESHOLD_ERROR_LIMIT)}"
            ) from None
    if window is not None:
        result = _with_window(result, _window(window, "--window"))
    if result != config.thresholds:
        changes["thresholds"] = result
    return dataclasses.replace(config, **changes) if changes else config
