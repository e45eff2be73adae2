"""Read a YAML file a user wrote, defensively: every way it can be unreadable is one line.

The text must be UTF-8 (a BOM is fine), at most :data:`MAX_FILE_BYTES`, and hold one
YAML document that ``yaml.safe_load`` accepts (no Python tags), nested at most
:data:`MAX_DEPTH` deep and holding at most :data:`MAX_VALUES` values once its aliases
are expanded (a "billion laughs" document is refused before it is built). The tag
``!replace`` wraps a value in :class:`~sim.model.scenario.overrides.Replace` (an override that
replaces a mapping instead of merging into it). Errors are :class:`ReadError`: a
:class:`~sim.core.errors.ScenarioError` naming the file, the line and column when known, what
was expected and what was found.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

import yaml
from yaml.reader import ReaderError

from sim.core.errors import ScenarioError
from sim.model.scenario.overrides import Replace

#: Largest file read (bytes): scenarios and sweeps are a few kilobytes.
MAX_FILE_BYTES = 16 * 1024 * 1024
#: Deepest nesting of mappings and lists (a scenario needs about 6, a sweep about 8).
MAX_DEPTH = 32
#: Most values (mappings, lists, scalars and keys) once aliases are expanded.
MAX_VALUES = 100_000

_UTF16_32_BOMS = (
    codecs.BOM_UTF32_LE,
    codecs.BOM_UTF32_BE,
    codecs.BOM_UTF16_LE,
    codecs.BOM_UTF16_BE,
)


class ReadError(ScenarioError):
    """A file that is not a readable YAML document; the message names the file (and the
    line and column when known)."""

    def __init__(
        self,
        source: str,
        expected: str,
        got: str,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(source, got, expected)
        where = source if line is None else f"{source} line {line}, column {column}"
        self.args = (f"{where}: expected {expected}, got {got}",)


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` plus the ``!replace`` tag; a key written twice in one mapping
    is an error (YAML would silently keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"the key {key_node.value!r} twice", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _construct_replace(loader: yaml.SafeLoader, node: yaml.Node) -> Replace:
    """``!replace {…}`` → ``Replace({…})``: the node built as if it had no tag."""
    tag = loader.resolve(type(node), node.value, (True, False))
    plain = type(node)(tag, node.value, node.start_mark, node.end_mark)
    return Replace(loader.construct_object(plain, deep=True))


_Loader.add_constructor("!replace", _construct_replace)


def _represent_replace(dumper: yaml.SafeDumper, value: Replace) -> yaml.Node:
    node = dumper.represent_data(value.value)
    node.tag = "!replace"
    return node


# a sweep given as a mapping is written to sweep.yaml with yaml.safe_dump
yaml.SafeDumper.add_representer(Replace, _represent_replace)


def read_text(path: Path) -> str:
    """The file's text; ReadError when it is missing, too large, binary or not UTF-8."""
    source = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ReadError(source, f"a file of at most {MAX_FILE_BYTES} bytes", f"{size} bytes")
        data = path.read_bytes()
    except OSError as exc:
        raise ReadError(source, "a readable file", exc.strerror or type(exc).__name__) from None
    if data.startswith(_UTF16_32_BOMS):
        raise ReadError(source, "UTF-8 text", "UTF-16 or UTF-32 text (save the file as UTF-8)")
    nul = data.find(b"\x00")
    if nul >= 0:
        line, column = _position(data, nul)
        raise ReadError(source, "UTF-8 text", "binary data (a NUL byte)", line, column)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line, column = _position(data, exc.start)
        got = f"a byte 0x{data[exc.start]:02x} that is not UTF-8"
        raise ReadError(source, "UTF-8 text", got, line, column) from None


def _position(data: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column (in bytes) of ``offset``."""
    line_start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, offset - line_start + 1


def load_text(text: str, source: str) -> Any:
    """The value of one YAML document (None when empty), bounded in depth and size."""
    try:
        _check_depth(text, source)
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_expansion(node, source)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        problem = str(exc.problem or "malformed YAML")
        if problem.startswith("but found") and exc.context:
            problem = f"{problem.removeprefix('but ')} ({exc.context})"
        problem = " ".join(problem.split())
        mark = exc.problem_mark or exc.context_mark
        raise ReadError(source, "valid YAML", problem, *_at(mark)) from None
    except ReaderError as exc:
        got = (
            f"the character #x{exc.character:04x}" if isinstance(exc.character, int) else "bad text"
        )
        line, column = _position(text.encode(), len(text[: exc.position].encode()))
        raise ReadError(source, "printable YAML text", got, line, column) from None
    except yaml.YAMLError as exc:
        raise ReadError(source, "valid YAML", " ".join(str(exc).split())) from None


def _at(mark: Any) -> tuple[int | None, int | None]:
    """1-based (line, column) of a YAML mark, or (None, None)."""
    return (mark.line + 1, mark.column + 1) if mark is not None else (None, None)


def _check_depth(text: str, source: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH, from the event stream (no recursion)."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise ReadError(
                    source,
                    f"mappings and lists nested at most {MAX_DEPTH} deep",
                    "deeper nesting",
                    *_at(event.start_mark),
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expansion(root: yaml.Node, source: str) -> None:
    """Refuse documents whose aliases expand past MAX_VALUES values or MAX_DEPTH levels,
    and recursive aliases; linear in the number of distinct nodes."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            on_path.discard(key)
            if size[key] > MAX_VALUES or depth[key] > MAX_DEPTH + 1:
                raise ReadError(
                    source,
                    f"at most {MAX_VALUES} values nested at most {MAX_DEPTH} deep once "
                    "aliases are expanded",
                    "more (a YAML alias bomb?)",
                    *_at(node.start_mark),
                )
            continue
        if key in size:
            continue
        if key in on_path:
            raise ReadError(
                source, "aliases to finished values", "a recursive alias", *_at(node.start_mark)
            )
        on_path.add(key)
        stack.append((node, True))
        stack.extend((kid, False) for kid in _children(node) if id(kid) not in size)


def describe(value: Any) -> str:
    """A value as an error message names what it is: ``an empty file``, ``a list``, …"""
    if value is None:
        return "an empty document"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def read_yaml(path: str | Path) -> dict[str, Any]:
    """The top-level mapping of a YAML file, or a ReadError saying what is wrong."""
    path = Path(path)
    return mapping_of(load_text(read_text(path), str(path)), str(path))


def mapping_of(data: Any, source: str) -> dict[str, Any]:
    """``data`` if it is a mapping, else a ReadError naming ``source``."""
    if not isinstance(data, dict):
        raise ReadError(source, "a mapping of keys at the top of the file", describe(data))
    return data
