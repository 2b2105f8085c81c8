"""The words of the demo crawl: real sentences, filled in and joined into paragraphs.

Two sources, both real text:

- `cdc/demo/demo_text.txt`, written for the project (MIT, with it): sentences of a shop,
  a local paper and a cookery blog in English, a shop in Japanese and a local paper in
  Chinese, each a template whose slots (`{PRODUCT}`, `{colour}`) are filled from short
  lists, plus the hosts' menus, cookie notices, footers and banners, and a legal notice.
  A page keeps one product, city or dish (its upper-case slots) throughout, so its
  paragraphs are about one thing; lower-case slots vary by sentence, which makes about a
  hundred thousand distinct pages from a few hundred sentences.
- The docstrings of the installed Python standard library (PSF licence, read from the
  sources with `ast`, so nothing is imported or copied into the project): the prose
  paragraphs of a module's public functions and classes make a reference page, as real
  documentation sites have. They come from the running Python, so the docs pages can
  differ between Python versions (they are the same for one version, on every machine).

Everything is picked by integer keys through a cheap 64-bit mix, never a seeded
`random.Random` per sentence, so a page is made in microseconds.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import random
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

DATA = Path(__file__).with_name("demo_text.txt")
SLOT = re.compile(r"\{(\w+)\}")
LIST_NAME = re.compile(r"^\[([\w.]+)\]$")
MASK = 0xFFFF_FFFF_FFFF_FFFF

# Pure-Python modules with prose docstrings: the docs host's pages.
DOC_MODULES = (
    "base64", "bisect", "calendar", "configparser", "contextlib", "difflib", "email.utils",
    "fileinput", "ftplib", "functools", "glob", "gzip", "heapq", "locale", "logging",
    "mimetypes", "pathlib", "queue", "random", "sched", "shutil", "smtplib", "statistics",
    "tempfile", "textwrap", "threading", "timeit", "tokenize", "traceback", "urllib.parse",
)  # the most prose for the least parsing: about 0.3 s for 850 paragraphs
DOC_PARAGRAPH = (60, 900)  # characters: shorter is a fragment, longer a wall of text
SOURCE_NAME = re.compile(r"^(\S+\.py\s*[-:]\s*|Module \S+ -- )")  # "functools.py - Tools for ..."
NOT_PROSE = re.compile(r">>>|::|\s--\s|^\s*[-*+]\s|\n\s", re.MULTILINE)

# (right, wrong): misspellings real pages carry, for the scripts without spaces; a typo fix
# turns the second back into the first. Where none fits, a character is typed twice.
CJK_TYPOS = {
    "ja": (("保証", "保障"), ("紹介", "照会"), ("以上", "異常"), ("確認", "確任")),
    "zh": (("认真地", "认真的"), ("有序地", "有序的"), ("已经", "以经"), ("部门", "部们")),
}
ENGLISH_WORD = re.compile(r"\b[a-z]{6,}\b")
CJK_CHARACTER = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")


@functools.cache
def lists() -> dict[str, tuple[str, ...]]:
    """The named lists of `DATA`."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in DATA.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if match := LIST_NAME.match(line):
            current = found.setdefault(match[1], [])
        elif current is None:
            raise ValueError(f"{DATA}: text before the first [list]: {line!r}")
        else:
            current.append(line.strip())
    return {name: tuple(items) for name, items in found.items()}


def mix(key: int, salt: int = 0) -> int:
    """A 64-bit mix of `key` and `salt` (splitmix64's finaliser): a cheap, stable pick."""
    key = (key + salt * 0x9E3779B97F4A7C15) & MASK
    key = ((key ^ (key >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    key = ((key ^ (key >> 27)) * 0x94D049BB133111EB) & MASK
    return key ^ (key >> 31)


def pick(items: tuple[str, ...], key: int, salt: int = 0) -> str:
    return items[mix(key, salt) % len(items)]


def joiner(language: str) -> str:
    """What separates sentences: a space, or nothing in Chinese and Japanese."""
    return "" if language in CJK_TYPOS else " "


def format_date(language: str, day: date) -> str:
    if language == "en":
        return f"{day.day} {MONTHS[day.month - 1]} {day.year}"
    return f"{day.year}年{day.month}月{day.day}日"


def dates_line(language: str, published: date, updated: date | None) -> str:
    """A news page's dateline: published, and updated when it was."""
    if language == "en":
        text = f"Published {format_date(language, published)}."
        return text + (f" Updated {format_date(language, updated)}." if updated else "")
    if language == "ja":
        text = f"公開日：{format_date(language, published)}。"
        return text + (f"更新日：{format_date(language, updated)}。" if updated else "")
    text = f"发布于{format_date(language, published)}。"
    return text + (f"更新于{format_date(language, updated)}。" if updated else "")


def misspell(text: str, language: str, key: int) -> str:
    """`text` with one typo, placed by `key`: two letters swapped in an English word, a wrong
    word from `CJK_TYPOS`, else a character typed twice."""
    if language in CJK_TYPOS:
        found = [(m.start(), right, wrong) for right, wrong in CJK_TYPOS[language]
                 for m in re.finditer(right, text)]
        if found:
            at, right, wrong = found[mix(key, 1) % len(found)]
            return text[:at] + wrong + text[at + len(right):]
        characters = [m.start() for m in CJK_CHARACTER.finditer(text)]
    else:
        words = [m for m in ENGLISH_WORD.finditer(text)
                 if any(a != b for a, b in zip(m[0][1:-2], m[0][2:-1], strict=True))]
        if words:
            word = words[mix(key, 1) % len(words)]
            inner = [i for i in range(word.start() + 1, word.end() - 2) if text[i] != text[i + 1]]
            at = inner[mix(key, 2) % len(inner)]
            return text[:at] + text[at + 1] + text[at] + text[at + 2:]
        characters = [m.start() for m in re.finditer(r"[a-z]", text)]
    if not characters:
        return text
    at = characters[mix(key, 3) % len(characters)]
    return text[:at + 1] + text[at:]


def shuffled(rng: random.Random, items: Iterable[str]) -> list[str]:
    items = list(items)
    rng.shuffle(items)
    return items


def menu(rng: random.Random, labels: tuple[str, ...], size: int) -> list[str]:
    """Groups of a mega-menu ("Kitchen: Kettles, Mugs, ..."), about `size` bytes in all."""
    groups: list[str] = []
    total = 0
    while total < size:
        group = rng.choice(labels) + ": " + ", ".join(rng.sample(labels, rng.randint(4, 8)))
        groups.append(group)
        total += len(group.encode()) + 3
    return groups


@dataclass(frozen=True)
class Writer:
    """Paragraphs, headings, titles and descriptions of one kind of page in one language.

    A page has a `subject` key, which fixes its upper-case slots; a paragraph or a heading
    has a key of its own, which picks its sentences and fills the other slots.
    """

    language: str
    kind: str

    def _list(self, name: str) -> tuple[str, ...]:
        found = lists()
        for full in (f"{self.language}.{self.kind}.{name}", f"{self.language}.{name}"):
            if full in found:
                return found[full]
        raise KeyError(f"no list {self.language}.{self.kind}.{name} in {DATA}")

    def fill(self, template: str, subject: int, key: int) -> str:
        def slot(match: re.Match) -> str:
            name = match[1]
            # PRODUCT and PRODUCT_MATERIAL share a salt: lists of one length stay aligned.
            salt = zlib.crc32(name.split("_")[0].encode())
            return pick(self._list(name), subject if name.isupper() else key, salt)
        return SLOT.sub(slot, template)

    def paragraph(self, key: int, subject: int, pool_name: str = "sentence") -> str:
        """Three to six different sentences of a pool ("sentence", or "rewrite": the
        page's text after a rewrite), in an order picked by `key`."""
        pool = self._list(pool_name)
        count = 3 + mix(key, 11) % 4
        picked: list[int] = []
        draw = key
        while len(picked) < min(count, len(pool)):
            draw = mix(draw, 13)
            if (index := draw % len(pool)) not in picked:
                picked.append(index)
        return joiner(self.language).join(self.fill(pool[i], subject, mix(key, i)) for i in picked)

    def heading(self, key: int, subject: int) -> str:
        return self.fill(pick(self._list("heading"), key, 17), subject, key)

    def title(self, subject: int) -> str:
        title = self.fill(pick(self._list("title"), subject, 19), subject, subject)
        return title[0].upper() + title[1:]

    def description(self, subject: int) -> str:
        return self.fill(pick(self._list("description"), subject, 23), subject, subject)


@dataclass(frozen=True)
class Docs:
    """The prose paragraphs of the standard library's docstrings, by module and object."""

    paragraphs: tuple[str, ...]
    items: tuple[tuple[str, int, int], ...]  # heading, first paragraph, end
    modules: tuple[tuple[str, str, int, int], ...]  # name, summary line, first item, end


def _prose(docstring: str | None) -> list[str]:
    """The paragraphs of a docstring that read as running text: no code, lists or tables."""
    paragraphs = []
    for block in (docstring or "").split("\n\n"):
        text = " ".join(block.split())
        if (DOC_PARAGRAPH[0] <= len(text) <= DOC_PARAGRAPH[1] and text[0].isupper()
                and text.endswith(".") and not NOT_PROSE.search(block.strip("\n"))):
            paragraphs.append(text)
    return paragraphs


def _objects(tree: ast.Module, module: str):
    """(heading, docstring) of a module's public functions, classes and their methods."""
    yield module, ast.get_docstring(tree)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_"):
            yield f"{module}.{node.name}", ast.get_docstring(node)
            if isinstance(node, ast.ClassDef):
                for member in node.body:
                    if isinstance(member, ast.FunctionDef) and not member.name.startswith("_"):
                        yield f"{module}.{node.name}.{member.name}", ast.get_docstring(member)


@functools.cache
def docs() -> Docs:
    """Read `DOC_MODULES`' sources (not imported: no side effects, and `-OO` keeps them)."""
    paragraphs: list[str] = []
    items: list[tuple[str, int, int]] = []
    modules: list[tuple[str, str, int, int]] = []
    for module in DOC_MODULES:
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
        first_item = len(items)
        for heading, docstring in _objects(tree, module):
            prose = _prose(docstring)
            if prose:
                items.append((heading, len(paragraphs), len(paragraphs) + len(prose)))
                paragraphs += prose
        if len(items) - first_item >= 3:
            first = " ".join((ast.get_docstring(tree) or "").split("\n\n")[0].split())
            summary = SOURCE_NAME.sub("", first).split(". ")[0].rstrip(".") or f"the {module} module"
            modules.append((module, summary, first_item, len(items)))
        else:
            del paragraphs[items[first_item][1] if len(items) > first_item else len(paragraphs):]
            del items[first_item:]
    if not modules:
        raise RuntimeError("no standard-library sources with docstrings: the docs host has no text")
    return Docs(tuple(paragraphs), tuple(items), tuple(modules))
