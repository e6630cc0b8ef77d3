"""Retrieval over the PostgreSQL manual (and the crew's knowledge chunks) for `dbcrew ask`.

The manual is the HTML of Debian's postgresql-doc-15 (or any folder of the same HTML given with
--docs). Each page is cut at its sections (sect1..sect4, refsect, and every configuration
parameter's entry, GUC-*), and every piece keeps `page.html#ANCHOR`, the citation a reader can
open. Search is hybrid: BM25 (bm25s) over words, with identifiers such as work_mem kept whole as
well as split, plus cosine over the project's own latent-semantic vectors (TF-IDF reduced by SVD,
searched with faiss), so nothing is downloaded. Building takes seconds; the index is built once
per manual folder and kept under the user's cache directory.
"""

from __future__ import annotations

import hashlib
import html
import itertools
import logging
import re
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from dbcrew.build_cache import cached_build
from dbcrew.operators.docs_vocabulary import expanded
from dbcrew.operators.knowledge import load_chunks

logging.getLogger("bm25s").setLevel(logging.WARNING)

DEBIAN_MANUAL = Path("/usr/share/doc/postgresql-doc-15/html")
MANUAL = "postgresql-manual"
KNOWLEDGE = "knowledge"
INDEX_VERSION = 8  # bump when chunking, tokens or the index layout change
SEMANTIC_WEIGHT = 0.35
NAMED_BOOST = 0.6  # a question that names a setting or an SQL command wants that entry first
# A question that says two words of a section's title in a row wants that section (a title field's
# weight, as BM25F gives it): 0.2 to 0.8 find the same sections of the bench's questions.
PHRASE_BOOST = 0.3
SVD_DIMENSIONS = 192
SECTION_CLASSES = {
    "sect1",
    "sect2",
    "sect3",
    "sect4",
    "refsect1",
    "refsect2",
    "chapter",
    "appendix",
    "refentry",
    "part",
    "preface",
}
SKIPPED_CLASSES = {
    "navheader",
    "navfooter",
    "toc",
    "list-of-tables",
    "list-of-figures",
    "list-of-examples",
}
HEADINGS = {"h1", "h2", "h3", "h4", "h5"}
# Not prose: a command's synopsis and every preformatted block. Searched, never quoted as an answer.
CODE_CLASSES = {"refsynopsisdiv"}
CODE_TAGS = {"pre"}
STOPWORDS = frozenset(
    """a an the of to for in on is are was be been by or and not no it its this that with as at from
which what when where who how why does do did can could should would will may might i me my you your we our they their
there here about into than then so if but also any all some such these those tell please explain mean means used use
using postgres postgresql""".split()
)


class Passage(BaseModel):
    """A searchable piece: a manual section or a knowledge chunk. `text` is its prose (what an answer
    quotes); `code` its synopses, examples and sub-headings (searched, never quoted)."""

    source: str
    section: str
    title: str
    text: str
    code: str = ""


class Hit(BaseModel):
    passage: Passage
    score: float


def words(text: str) -> list[str]:
    """Search tokens: lower-case words; an identifier like autovacuum_freeze_max_age also by its parts; plural s dropped."""
    out: list[str] = []
    for word in re.findall(r"[a-z0-9_]+", text.lower()):
        parts = [p for p in word.split("_") if p]
        for token in ([word] if len(parts) > 1 else []) + parts:
            if token in STOPWORDS or len(token) < 2:
                continue
            out.append(
                token[:-1]
                if len(token) > 4 and token.endswith("s") and not token.endswith("ss")
                else token
            )
    return out


class _Sections(HTMLParser):
    """One manual page cut into its sections; text inside navigation and tables of contents is dropped."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.page = page
        self.pieces: list[dict[str, Any]] = [{"anchor": "", "title": [], "text": [], "code": []}]
        self.current = 0
        # per open div: skipped?, code?, the section it restores when it closes
        self.divs: list[tuple[bool, bool, int | None]] = []
        self.skipping = 0
        self.coding = 0
        self.in_title = False
        self.in_heading = False

    def _start_piece(self, anchor: str) -> None:
        self.pieces.append({"anchor": anchor, "title": [], "text": [], "code": []})
        self.current = len(self.pieces) - 1

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        classes = set((attributes.get("class") or "").split())
        anchor = attributes.get("id") or ""
        if tag == "div":
            skip = bool(classes & SKIPPED_CLASSES)
            code = bool(classes & CODE_CLASSES)
            restore = None
            if anchor and classes & SECTION_CLASSES and not self.skipping:
                restore = self.current
                self._start_piece(anchor)
            self.divs.append((skip, code, restore))
            self.skipping += skip
            self.coding += code
        elif tag in CODE_TAGS:
            self.coding += 1
        elif tag == "dt" and anchor.startswith("GUC-") and not self.skipping:
            self._start_piece(anchor)
            self.in_title = True
        elif tag in HEADINGS:
            self.in_title = not self.pieces[self.current]["title"]
            self.in_heading = not self.in_title

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self.divs:
            skip, code, restore = self.divs.pop()
            self.skipping -= skip
            self.coding -= code
            if restore is not None:
                self.current = restore
        elif tag in CODE_TAGS:
            self.coding = max(0, self.coding - 1)
        elif tag in HEADINGS or tag == "dt":
            self.in_title = self.in_heading = False

    def handle_data(self, data: str) -> None:
        if self.skipping:
            return
        piece = self.pieces[self.current]
        if self.in_title:
            piece["title"].append(data)
        elif self.coding or self.in_heading:
            piece["code"].append(data)  # a sub-heading would glue to the next sentence
        else:
            piece["text"].append(data)

    def passages(self) -> list[Passage]:
        """The page's sections; each sub-section also searched by its page's title ("CREATE TABLE"
        for its "Storage Parameters"), which its own title leaves out."""
        titles = [" ".join("".join(p["title"]).split()) for p in self.pieces]
        page_title = next((t for t in titles if t), "")
        out = []
        for piece, title in zip(self.pieces, titles):
            text = " ".join("".join(piece["text"]).split())
            code = " ".join("".join(piece["code"]).split())
            if title != page_title:
                code = f"{page_title} {code}"
            if len(text) + len(code) < 40:
                continue
            section = f"{self.page}#{piece['anchor']}" if piece["anchor"] else self.page
            out.append(Passage(source=MANUAL, section=section, title=title, text=text, code=code))
        return out


def manual_passages(folder: Path) -> list[Passage]:
    passages: list[Passage] = []
    for path in sorted(folder.glob("*.html")):
        parser = _Sections(path.name)
        parser.feed(path.read_text(encoding="utf-8", errors="replace"))
        parser.close()
        passages.extend(parser.passages())
    return passages


def knowledge_passages() -> list[Passage]:
    return [
        Passage(
            source=KNOWLEDGE,
            section=c.name,
            title=c.name.replace("_", " "),
            text=f"{c.content} {c.steps} {c.solution} (manual: {c.source})",
        )
        for c in load_chunks()
    ]


class DocsIndex:
    """BM25 plus latent-semantic cosine over passages; pickled whole into the cache."""

    def __init__(self, passages: list[Passage]):
        import bm25s
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer

        logging.getLogger("bm25s").setLevel(
            logging.WARNING
        )  # bm25s sets its own level when imported
        if not passages:
            raise ValueError("no passage to index: the manual folder holds no HTML section")
        self.passages = passages
        docs = [
            words(f"{p.title} {p.title} {p.title} {_label(p)} {p.text} {p.code}") or ["empty"]
            for p in passages
        ]
        self.bm25 = bm25s.BM25()
        self.bm25.index(docs, show_progress=False)
        self.tfidf = TfidfVectorizer(analyzer=words, sublinear_tf=True, min_df=2)
        matrix = self.tfidf.fit_transform(
            [f"{p.title} {p.title} {_label(p)} {p.text} {p.code}" for p in passages]
        )
        self.svd = TruncatedSVD(
            n_components=min(SVD_DIMENSIONS, matrix.shape[1] - 1, len(passages) - 1), random_state=0
        )
        self.vectors = _normalised(self.svd.fit_transform(matrix))
        self._faiss: Any = None
        self.named: dict[str, list[int]] = {}
        self.phrases: dict[tuple[str, str], list[int]] = {}
        for i, p in enumerate(passages):
            name = _named_entry(p)
            if name:
                self.named.setdefault(name, []).append(i)
            for phrase in _phrases(p.title):
                self.phrases.setdefault(phrase, []).append(i)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_faiss": None}

    def _semantic(self, query: str) -> np.ndarray:
        import faiss

        if self._faiss is None:
            self._faiss = faiss.IndexFlatIP(self.vectors.shape[1])
            self._faiss.add(self.vectors)
        vector = _normalised(self.svd.transform(self.tfidf.transform([query])))
        found, ids = self._faiss.search(vector, len(self.passages))
        out = np.zeros(len(self.passages), dtype=np.float32)
        out[ids[0]] = found[0]
        return out

    def search(self, query: str, k: int = 3, source: str | None = None) -> list[Hit]:
        """The k best passages for `query` (optionally of one source), best first."""
        if not words(query):
            return []
        asked, query = query, expanded(query)
        tokens = words(query)
        lexical = np.asarray(self.bm25.get_scores(tokens), dtype=np.float32)
        top = float(lexical.max()) or 1.0
        scores = lexical / top + SEMANTIC_WEIGHT * self._semantic(query)
        spoken = " " + " ".join(re.findall(r"[a-z0-9_]+", asked.lower())) + " "
        for name, positions in self.named.items():
            if f" {name} " in spoken:
                scores[positions] += NAMED_BOOST
        titled = {i for phrase in _phrases(asked) for i in self.phrases.get(phrase, ())}
        scores[sorted(titled)] += PHRASE_BOOST
        if source is not None:
            scores = np.where([p.source == source for p in self.passages], scores, -1.0)
        order = np.argsort(-scores)[:k]
        return [
            Hit(passage=self.passages[i], score=round(float(scores[i]), 4))
            for i in order
            if scores[i] > 0
        ]


def _phrases(text: str) -> set[tuple[str, str]]:
    """Pairs of consecutive search words: "Preventing Transaction ID Wraparound Failures" holds
    ("transaction", "id") and ("id", "wraparound"). A long reference section that covers a subject
    loses to short mentions of it under BM25's length normalization; its title saying the
    question's phrase is the evidence that it is about that subject."""
    return set(itertools.pairwise(words(text)))


def _label(passage: Passage) -> str:
    """The words of a manual section's page name and anchor ("brin-intro.html", "VACUUM-FOR-WRAPAROUND"):
    the manual's authors name pages and sections by their subject, which a sub-section's own title
    ("Introduction") often leaves out. Generated anchors (id-1.9.3...) say nothing and are skipped."""
    if passage.source != MANUAL:
        return ""
    page, _, anchor = passage.section.partition("#")
    label = page.removesuffix(".html").replace("-", " ")
    if anchor and not anchor.startswith("id-"):
        label += " " + anchor.replace("-", " ").lower()
    return label


def _named_entry(passage: Passage) -> str:
    """The name a passage is the reference entry of (a setting, an SQL command), as a question would spell it."""
    anchor = passage.section.partition("#")[2]
    if not anchor.startswith(("GUC-", "SQL-")):
        return ""
    return " ".join(re.findall(r"[a-z0-9_]+", passage.title.split(" (")[0].lower()))


def _normalised(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0, 1, norms)).astype(np.float32)


def _fingerprint(folder: Path) -> str:
    """Changes when the folder's pages or the index layout do."""
    digest = hashlib.sha256(f"{INDEX_VERSION}:{folder.resolve()}".encode())
    for path in sorted(folder.glob("*.html")):
        stat = path.stat()
        digest.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def manual_folder(docs: Path | None) -> Path:
    """The manual to search: `docs` when given, else Debian's postgresql-doc-15. FileNotFoundError says how to get one."""
    folder = docs if docs is not None else DEBIAN_MANUAL
    if not folder.is_dir() or not any(folder.glob("*.html")):
        raise FileNotFoundError(
            f"no PostgreSQL manual (HTML pages) in {folder}: install the postgresql-doc-15 package "
            "or pass --docs DIR"
        )
    return folder


@lru_cache(maxsize=4)
def docs_index(folder: Path) -> DocsIndex:
    """The index of `folder`'s manual plus the knowledge chunks: from the cache, else built and cached."""
    return cached_build(
        "docs",
        _fingerprint(folder),
        DocsIndex,
        lambda: DocsIndex(manual_passages(folder) + knowledge_passages()),
    )


# A sentence that leans on the one before it: quoted alone, it would start mid-thought.
_LEANS_BACK = re.compile(
    r"^(?:this|these|that|those|it|its|they|their|such|however|therefore|thus|hence|also|but|so|"
    r"otherwise|instead|likewise|similarly|in (?:this|that|addition|particular)|for (?:this|that) reason)\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")


def best_sentences(text: str, query: str, limit: int = 420, title: str = "") -> str:
    """Whole sentences of the passage around the one that shares the most words with the query, in
    their order, within `limit` characters: from the sentence it leans on ("This ...", "However ...")
    onwards, so an answer never starts mid-thought. The title's words do not count (the whole passage
    is about them: "what does work_mem do" wants work_mem's first sentence, not the one repeating its
    name). A single sentence longer than `limit` is cut at a word."""
    sentences = [s for s in _SENTENCE_END.split(html.unescape(text)) if s.strip()]
    if not sentences:
        return ""
    wanted = set(words(query)) - set(words(title))
    # A section's first sentence usually says what it is about: it wins a tie and a one-word deficit.
    best = max(
        range(len(sentences)),
        key=lambda i: (len(wanted & set(words(sentences[i]))) + (i == 0), -i),
    )
    start = best
    while (
        start > 0
        and _LEANS_BACK.match(sentences[start])
        and best - start < 2
        and sum(len(x) + 1 for x in sentences[start - 1 : best + 1]) <= limit
    ):
        start -= 1
    chosen: list[str] = []
    length = 0
    for sentence in sentences[start:]:
        if chosen and length + len(sentence) + 1 > limit:
            break
        chosen.append(sentence)
        length += len(sentence) + 1
    excerpt = " ".join(chosen)
    if len(excerpt) <= limit:
        return excerpt
    return excerpt[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"
