"""Features -> CategoryVerdict: the deterministic content category of a request, for category routes.

The category says what kind of work a request is, so that a category route can send it to the model that is
good at it (the router-design article's content-based routing). It is decided from what the tier classifier
has already read (``Features``), in this order; the first rule that fires decides:

====================  ===============  ===================================================================
category              rule             when
====================  ===============  ===================================================================
``vision``            ``attachments``  the request carries an image
``long_context``      ``context``      the estimated input reaches the threshold (32,000 tokens by default)
``code``              ``code``         the conversation shows code or diagnostics (``Features.code_evidence``)
first keyword found   ``keywords``     a keyword of ``code``, ``math``, ``analysis`` or ``writing`` (searched
                                       in that order of precedence) in the latest user message
``math``              ``notation``     math notation in the latest user message (``3 * 4``, ``x^2``, ``∫``)
``general``           ``default``      nothing else fired
====================  ===============  ===================================================================

Keywords match as the tier keywords do (``routing.core.classifier``: case-folded, whole words in scripts that
separate words with spaces, substrings in Chinese or Japanese, ``*`` marks a stem). When keywords of several
categories occur, the category listed first in ``KEYWORD_CATEGORIES`` wins, so "write a Python function"
is ``code`` and "write down the integral" is ``math``. Operators replace a category's list (config file
``settings.category_keywords``, admin); a category they leave out keeps its built-in list.

Strengths. A model's ``strengths`` are tags an operator chooses (the router-design article labels models
``reasoning``, ``fast``, ``creative``, ...): letters, digits, ``-`` and ``_``, at most 32 characters. The seven
categories are the well-known tags, the ones a category route decides by; a routing policy may select by any
tag (``known_strengths``).

Cost: one list of all categories' keywords is matched by looking up the words of the case-folded latest user
text that the tier classifier shares (``Features.folded_user_text``; ``routing.core.keyword_index``), not by
a search per keyword; math notation is looked for with a few single-character searches. Nothing here does
I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from routing.core.features import Features
from routing.core.keyword_index import WordIndexMatcher

Category = Literal["code", "writing", "analysis", "math", "vision", "long_context", "general"]
CATEGORIES: tuple[str, ...] = ("code", "writing", "analysis", "math", "vision", "long_context", "general")
# The categories decided by keywords, in order of precedence when keywords of several occur.
KEYWORD_CATEGORIES: tuple[str, ...] = ("code", "math", "analysis", "writing")
CATEGORY_HEADER = "x-gomodel-category"
DEFAULT_LONG_CONTEXT_TOKENS = 32_000
MAX_STRENGTH_TAG = 32  # the stored width of a routing policy's strength
_STRENGTH_TAG = re.compile(r"[A-Za-z0-9_-]{1,32}")


def strength_tag_problem(tag: object) -> str | None:
    """Why ``tag`` cannot be a model strength (letters, digits, - and _, 1-32 characters), or None."""
    if not isinstance(tag, str):
        return f"a strength is a tag (a string), got {tag!r}"
    if not _STRENGTH_TAG.fullmatch(tag):
        return (f"the strength {tag[:40]!r} is not a tag: use 1-{MAX_STRENGTH_TAG} letters, digits, - or _ "
                f"(the well-known ones are {', '.join(CATEGORIES)})")
    return None


def known_strengths(carried: Iterable[str]) -> tuple[str, ...]:
    """The tags a routing policy may select by: the categories, then every other tag a model carries (sorted)."""
    return (*CATEGORIES, *sorted(set(carried) - set(CATEGORIES)))

DEFAULT_CATEGORY_KEYWORDS: Mapping[str, tuple[str, ...]] = {
    "code": (
        # English
        "code", "coding", "source code", "write a function", "function call*", "bug", "bugs", "debug*",
        "refactor*", "compile*", "compiler", "stack trace", "traceback", "exception", "segfault",
        "null pointer", "syntax error", "regex", "regular expression", "sql", "python", "javascript",
        "typescript", "java", "golang", "rust", "c++", "c#", "kotlin", "php", "ruby", "html", "css", "json",
        "yaml", "api", "endpoint", "unit test*", "pull request", "git", "dockerfile", "kubernetes",
        "shell script", "bash script", "algorithm*", "programming", "recursion", "recursive", "npm",
        "pip install", "runtime error",
        # German
        "programmier*", "Quellcode", "Skript", "debuggen", "kompilier*", "Codezeile*",
        "Fehlermeldung", "refaktorier*", "Algorithmus", "Datenbankabfrage", "Unittest*",
        # Chinese (simplified and traditional)
        "代码", "代碼", "程式", "编程", "編程", "编程语言", "报错", "報錯", "调试", "調試", "编译", "編譯",
        "重构", "重構", "脚本", "腳本", "正则表达式", "正則表達式", "算法", "演算法", "数据库", "資料庫",
        "源码", "源碼", "接口文档",
    ),
    "math": (
        # English
        "math", "maths", "mathematics", "mathematical", "equation*", "solve for", "integral*", "integrate",
        "derivative*", "differentiate", "calculus", "algebra*", "geometry", "theorem", "lemma", "proof",
        "prove", "probability", "matrix", "matrices", "eigenvalue*", "polynomial*", "logarithm*", "arithmetic",
        "quadratic", "trigonometr*", "factorial", "prime number*", "calculate", "square root",
        # LaTeX, matched anywhere
        "*\\frac*", "*\\int*", "*\\sum*", "*\\sqrt*", "*$$*",
        # German
        "Mathe", "Mathematik", "Gleichung*", "Integral", "Ableitung*", "ableiten", "Wahrscheinlichkeit*",
        "Matrix", "Beweis", "beweise", "berechne*", "Polynom*", "Quadratwurzel", "Primzahl*", "Satz des",
        # Chinese (simplified and traditional)
        "数学", "數學", "方程", "积分", "積分", "导数", "導數", "微分", "求导", "求導", "证明", "證明", "概率",
        "机率", "機率", "矩阵", "矩陣", "几何", "幾何", "代数", "代數", "计算", "計算", "解方程", "多项式",
        "多項式", "对数", "對數", "定理", "质数", "質數", "平方根",
    ),
    "analysis": (
        # English
        "analyze", "analyse", "analysis", "analyzing", "analysing", "compare", "comparison", "evaluate",
        "evaluation", "assess*", "pros and cons", "trade-off*", "tradeoff*", "summarize", "summarise",
        "summary", "insight*", "trend*", "statistic*", "dataset", "data set", "interpret*", "critique",
        "implications", "forecast*", "breakdown", "swot", "kpi", "kpis", "benchmark*", "root cause*", "research",
        "review",
        # German
        "analysier*", "Analyse", "vergleich*", "bewerte*", "Bewertung", "Vor- und Nachteile",
        "zusammenfass*", "auswert*", "einschätz*", "Statistik*", "interpretier*", "Ursache*", "Prognose*",
        # Chinese (simplified and traditional)
        "分析", "比较", "比較", "对比", "對比", "评估", "評估", "优缺点", "優缺點", "利弊", "总结", "總結",
        "归纳", "歸納", "趋势", "趨勢", "统计", "統計", "解读", "解讀", "研究", "评价", "評價",
    ),
    "writing": (
        # English
        "write", "rewrite", "draft", "essay", "story", "poem", "poetry", "blog post", "article", "letter",
        "email", "e-mail", "cover letter", "slogan", "tagline", "headline", "lyrics", "novel", "fiction",
        "creative", "proofread", "paraphrase", "copywriting", "marketing copy", "speech", "screenplay",
        "translate", "translation", "polish", "tone", "wording",
        # German
        "schreib*", "verfass*", "formulier*", "Aufsatz", "Gedicht", "Geschichte", "Anschreiben",
        "Bewerbung*", "umschreib*", "Korrektur lesen", "Werbetext*", "Rede", "übersetz*", "Blogbeitrag",
        "Artikel", "Liedtext",
        # Chinese (simplified and traditional)
        "写", "寫", "写作", "寫作", "文章", "作文", "诗", "詩", "故事", "小说", "小說", "邮件", "郵件",
        "信件", "文案", "润色", "潤色", "改写", "改寫", "翻译", "翻譯", "演讲稿", "演講稿", "歌词", "歌詞",
        "撰写", "撰寫",
    ),
}  # fmt: skip

# Math notation: a symbol that is math wherever it occurs, or an operator between two operands.
_MATH_SYMBOLS = ("√", "∑", "∫", "∂", "≤", "≥", "≠", "±", "∞", "π", "²", "³")
_MATH_OPERATORS = ("=", "+", "*", "^", "×", "÷")
_MAX_OPERATOR_LOOKS = 32  # a text full of "=" (a log, a table) is not read further than this


@dataclass(frozen=True, slots=True)
class CategoryVerdict:
    """The category of a request and the rule that decided it, with what triggered the rule."""

    category: str  # one of CATEGORIES
    rule: str  # "header", "attachments", "context", "code", "keywords", "notation" or "default"
    detail: str


class CategoryMatcher:
    """Finds the category of the first keyword (in order of precedence) in a case-folded text."""

    __slots__ = ("matcher", "_category_of")

    def __init__(self, keywords: Mapping[str, Sequence[str]]) -> None:
        ordered: list[str] = []
        category_of: dict[str, str] = {}
        for category in KEYWORD_CATEGORIES:
            for keyword in keywords.get(category, ()):
                raw = keyword.strip()
                if raw and raw not in category_of:  # a keyword listed twice belongs to the earlier category
                    category_of[raw] = category
                    ordered.append(raw)
        self.matcher = WordIndexMatcher(ordered)
        self._category_of = category_of

    def first_match(self, folded: str) -> tuple[str, str] | None:
        """``(category, keyword)`` of the earliest keyword found in ``folded`` (already case-folded), or None."""
        keyword = self.matcher.first_match_folded(folded)
        return None if keyword is None else (self._category_of[keyword], keyword)


def merged_keywords(overrides: Mapping[str, Sequence[str]] | Sequence[tuple[str, Sequence[str]]]) -> dict[
        str, tuple[str, ...]]:
    """The keyword lists in force: each category an operator configured replaces its built-in list."""
    given = dict(overrides.items() if isinstance(overrides, Mapping) else overrides)
    return {category: tuple(given.get(category) or DEFAULT_CATEGORY_KEYWORDS[category])
            for category in KEYWORD_CATEGORIES}


@lru_cache(maxsize=16)
def category_matcher(overrides: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> CategoryMatcher:
    """The compiled matcher for an operator's overrides (``()``: the built-in lists), built once per value."""
    return CategoryMatcher(merged_keywords(overrides))


def classify_category(
    features: Features,
    *,
    keywords: tuple[tuple[str, tuple[str, ...]], ...] = (),
    long_context_tokens: int = DEFAULT_LONG_CONTEXT_TOKENS,
) -> CategoryVerdict:
    """The category of one request; ``keywords`` holds the operator's per-category overrides (hashable)."""
    if "image" in features.attachments:
        count = features.attachments.count("image")
        return CategoryVerdict("vision", "attachments", f"{count} image{'s' if count != 1 else ''}")
    if features.estimated_input_tokens >= long_context_tokens:
        return CategoryVerdict("long_context", "context",
                               f"~{features.estimated_input_tokens} tokens (threshold {long_context_tokens})")
    if features.code_evidence:
        return CategoryVerdict("code", "code", features.code_evidence)
    text = features.latest_user_text
    if text:
        folded = features.folded_user_text
        found = category_matcher(keywords).first_match(folded)
        if found is not None:
            return CategoryVerdict(found[0], "keywords", found[1])
        notation = math_notation(folded)
        if notation:
            return CategoryVerdict("math", "notation", notation)
    return _GENERAL


_GENERAL = CategoryVerdict("general", "default", "no rule matched")


def forced_verdict(category: str) -> CategoryVerdict:
    """The verdict for a category a client forced with ``X-GoModel-Category``."""
    return CategoryVerdict(category, "header", "X-GoModel-Category")


def math_notation(text: str) -> str:
    """The math notation found in ``text``: a math symbol, or an operator between operands (``12 * 7``,
    ``x^2``, ``y = 3``); "" when there is none. Why not a regex: an unanchored alternation costs ~50 ns per
    character, while a one-character ``in`` is a memchr; the operands are read only around a found operator."""
    for symbol in _MATH_SYMBOLS:
        if symbol in text:
            return symbol
    for operator in _MATH_OPERATORS:
        start = text.find(operator)
        looks = 0
        while start >= 0 and looks < _MAX_OPERATOR_LOOKS:
            looks += 1
            if _operand_before(text, start) and _operand_after(text, start + 1, operator):
                return f"{operator} between operands"  # never the client's text: it reaches the audit trail
            start = text.find(operator, start + 1)
    return ""


def _operand_before(text: str, index: int) -> bool:
    """A number, a one-letter variable or a closing bracket ends just before ``index`` (spaces skipped)."""
    i = index - 1
    while i >= 0 and text[i] == " ":
        i -= 1
    if i < 0:
        return False
    char = text[i]
    if char.isdigit() or char == ")":
        return True
    # A lone ASCII letter (x, n): not a word, which would make "a+b" of "c++" or "rock+roll".
    return char.isascii() and char.isalpha() and (i == 0 or not text[i - 1].isalnum())


def _operand_after(text: str, index: int, operator: str) -> bool:
    """A number, a one-letter variable or an opening bracket starts at ``index`` (spaces and a sign skipped)."""
    end = len(text)
    i = index
    while i < end and text[i] == " ":
        i += 1
    if i < end and text[i] == "-" and operator != "^":
        i += 1
    if i >= end:
        return False
    char = text[i]
    if char.isdigit() or char == "(" or (operator == "^" and char == "{"):
        return True
    return char.isascii() and char.isalpha() and (i + 1 == end or not text[i + 1].isalnum())
