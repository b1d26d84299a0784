"""Seeded generator of realistic Chinese news articles (title, body, summary, keywords).

Each article instantiates one event frame (`frames.FRAMES`) with slot values
from `lexicon`: the body's lead sentence states the event with all its slots,
detail and filler sentences follow, and the title and summary restate the
slots in frame-specific patterns.  So the three tasks -- title generation,
summarisation, keyword extraction -- are learnable from the body, while
slot values vary enough that a model has to copy rather than memorise.

    >>> arts = generate(3, seed=0)
    >>> [a.id for a in arts]
    ['n0-000000', 'n0-000001', 'n0-000002']
    >>> generate(3, seed=0) == arts
    True
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from labkit.corpus import lexicon as L
from labkit.corpus.frames import FRAMES, Frame

TITLE_LEN = (12, 40)
BODY_LEN = (150, 600)
SUMMARY_LEN = (40, 100)

GENERAL_FILLERS = (
    "业内人士表示，这一举措将进一步推动当地高质量发展。",
    "据了解，相关工作已于今年年初启动。",
    "有关部门表示，将持续跟踪后续进展并及时向社会公布。",
    "不少市民对此表示欢迎，认为这将给生活带来更多便利。",
    "专家认为，这一变化反映出当地发展的新趋势。",
    "相关负责人介绍，下一步将进一步完善配套措施。",
    "记者在现场看到，工作人员正在有序开展各项工作。",
    "此前，类似做法已在多个城市取得良好效果。",
    "多位受访者表示，希望相关政策能够长期坚持下去。",
    "当天，多家媒体对此进行了报道。",
    "相关数据将在月底前正式对外发布。",
    "据悉，这一消息引起了社会各界的广泛关注。",
)

CATEGORY_FILLERS = {
    "财经": ("分析人士指出，市场对相关行业前景总体保持乐观。", "近期多家机构上调了对该行业的增长预期。"),
    "科技": ("近年来，我国在科技创新领域持续加大投入。", "业内认为，技术迭代速度正在明显加快。"),
    "体育": ("本赛季的比赛吸引了大量观众关注。", "体育部门表示将继续推动全民健身。"),
    "天气": ("气象专家提醒，近期天气变化较大，请及时关注预报。", "交通、电力等部门已加强值守。"),
    "健康": ("医学专家提醒，日常应注意合理饮食和适量运动。", "近年来，当地医疗服务能力不断提升。"),
    "教育": ("教育部门表示，将持续推进教育公平。", "家长们对此普遍表示认可。"),
    "交通": ("交通部门提醒市民合理安排出行时间。", "近年来，当地交通网络不断完善。"),
    "文化": ("文化部门表示，将持续丰富群众精神文化生活。", "不少观众专程从外地赶来。"),
    "农业": ("农业部门表示，将继续加强农业社会化服务。", "当地农民的收入持续增加。"),
    "法治": ("法律专家表示，此案对同类案件具有参考意义。", "相关部门将继续加大执法力度。"),
    "环境": ("生态环境部门表示，将持续打好污染防治攻坚战。", "绿色发展理念日益深入人心。"),
}

_HOSPITAL = ("第一人民医院", "中心医院", "中医院", "人民医院", "妇幼保健院")
_UNI = ("大学", "理工大学", "师范大学", "科技大学", "医科大学")
_JOURNAL = ("自然", "科学", "细胞", "物理评论快报", "自然·通讯", "柳叶刀")


_SIMPLE = {
    "city": L.CITIES,
    "product": L.PRODUCTS,
    "field": L.FIELDS,
    "event": L.SPORT_EVENTS,
    "item": L.SPORT_ITEMS,
    "color": L.WARNING_COLORS,
    "hazard": L.HAZARDS,
    "surgery": L.SURGERIES,
    "checkup": L.CHECKUPS,
    "disease": L.DISEASES,
    "subject": L.SUBJECTS,
    "exhibit": L.EXHIBITS,
    "film": L.FILMS,
    "festival": L.FESTIVALS,
    "crop": L.CROPS,
    "crime": L.CRIMES,
    "case": L.CASES,
    "tree": L.TREES,
    "journal": _JOURNAL,
}


@dataclass
class Article:
    """One generated news article; `keywords` all occur in `body`."""

    id: str
    title: str
    body: str
    summary: str
    keywords: list[str] = field(default_factory=list)
    category: str = ""

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "title": self.title,
            "body": self.body,
            "summary": self.summary,
            "keywords": list(self.keywords),
            "category": self.category,
        }


def _kind_value(kind: str, rng: random.Random) -> str:
    """One slot value of a lexicon kind or numeric spec."""
    if ":" in kind:
        typ, lo, hi = kind.split(":")
        if typ == "int":
            return str(rng.randint(int(lo), int(hi)))
        return f"{rng.uniform(float(lo), float(hi)):.1f}"
    c = rng.choice
    if kind in _SIMPLE:
        return c(_SIMPLE[kind])
    if kind == "company":
        return c(L.BRANDS) + c(L.INDUSTRIES)
    if kind == "person":
        return c(L.SURNAMES) + c(L.GIVEN)
    if kind == "team":
        return c(L.CITIES) + c(L.TEAM_NAMES) + "队"
    if kind == "uni":
        return c(L.CITIES) + c(_UNI)
    if kind == "hospital":
        return c(L.CITIES) + "市" + c(_HOSPITAL)
    if kind == "museum":
        return c(L.CITIES) + c(L.MUSEUMS)
    raise KeyError(f"unknown slot kind {kind!r}")


def _slots(frame: Frame, rng: random.Random) -> dict[str, str]:
    slots = {
        "city": rng.choice(L.CITIES),
        "date": f"{rng.randint(1, 12)}月{rng.randint(1, 28)}日",
        "person": _kind_value("person", rng),
        "product": rng.choice(L.PRODUCTS),
    }
    for name, kind in frame.slots.items():
        value = _kind_value(kind, rng)
        # a second slot of the same kind ("company2", "team2", "city2") must differ
        base = name.rstrip("0123456789")
        while base != name and value == slots.get(base):
            value = _kind_value(kind, rng)
        slots[name] = value
    return slots


def _body(frame: Frame, slots: dict[str, str], rng: random.Random) -> str:
    sentences = [d.format(**slots) for d in frame.details]
    pool = list(GENERAL_FILLERS) + list(CATEGORY_FILLERS[frame.category])
    sentences += rng.sample(pool, rng.randint(3, 8))
    rng.shuffle(sentences)
    lead = rng.choice(frame.leads).format(**slots)
    parts = [lead] + sentences
    if rng.random() < 0.4:
        byline = f"（记者 {rng.choice(L.SURNAMES)}{rng.choice(L.GIVEN)}）"
        parts.insert(0, f"本报{slots['city']}{slots['date']}电{byline}")
    # two or three paragraphs, as a crawled page has them
    cut = sorted(rng.sample(range(2, len(parts)), k=min(2, len(parts) - 2)))
    paras, start = [], 0
    for end in cut + [len(parts)]:
        paras.append("".join(parts[start:end]))
        start = end
    return "\n".join(p for p in paras if p)


def _keywords(frame: Frame, slots: dict[str, str], body: str, rng: random.Random) -> list[str]:
    words = [k[1:] if k.startswith("=") else slots[k] for k in frame.keywords]
    words = list(dict.fromkeys(w for w in words if w in body))
    for extra in (slots["city"], slots["person"], slots["product"]):
        if len(words) >= 3:
            break
        if extra in body and extra not in words:
            words.append(extra)
    return words[:5]


def _summary(frame: Frame, slots: dict[str, str], body: str, rng: random.Random) -> str:
    """The frame's summary pattern, extended with the body's details (in body order) up to 40 chars."""
    summary = rng.choice(frame.summaries).format(**slots)
    details = sorted((d.format(**slots) for d in frame.details), key=body.find)
    for sentence in details:
        if len(summary) >= SUMMARY_LEN[0]:
            break
        if sentence not in summary:
            summary += sentence
    return summary


def make_article(article_id: str, rng: random.Random) -> Article:
    """One article from `rng`; retries slot draws until every length contract holds."""
    for _ in range(50):
        frame = rng.choice(FRAMES)
        slots = _slots(frame, rng)
        titles = [t.format(**slots) for t in frame.titles]
        titles = [t for t in titles if TITLE_LEN[0] <= len(t) <= TITLE_LEN[1]]
        body = _body(frame, slots, rng)
        summary = _summary(frame, slots, body, rng)
        keywords = _keywords(frame, slots, body, rng)
        if (
            titles
            and BODY_LEN[0] <= len(body) <= BODY_LEN[1]
            and SUMMARY_LEN[0] <= len(summary) <= SUMMARY_LEN[1]
            and len(keywords) >= 3
        ):
            return Article(article_id, rng.choice(titles), body, summary, keywords, frame.category)
    raise RuntimeError(f"could not generate article {article_id} within length limits")


def generate(n: int, seed: int) -> list[Article]:
    """`n` articles, identical for the same `seed`; ids are `n<seed>-<index>`."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = random.Random(f"labkit-corpus-{seed}")
    return [make_article(f"n{seed}-{i:06d}", rng) for i in range(n)]
