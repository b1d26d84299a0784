"""Exact and near-duplicate detection: MinHash over character n-grams with LSH banding.

Chinese has no spaces, so shingles are character 5-grams of the body after
`fold_for_signature` (punctuation width folded, whitespace removed: a copy
that writes `,` for `，` or adds spaces is the same text; the kept body keeps
its own punctuation).  Signatures *and* band keys are computed per record in
the workers (numpy); the `Deduper` sees records in input order, keeps the
first of each group and decides in O(bands) per record:

* exact: one dict lookup of a digest of title+body;
* near: each of the BANDS band keys (a 64-bit hash of ROWS minhash rows) is
  looked up in one dict; a bucket holds at most BUCKET_CAP kept records, so
  the few band values that template text (shared filler sentences) makes
  common cannot grow the candidate list with the corpus -- a true near
  duplicate shares ~BANDS*J^ROWS bands with its original and almost all of
  them are article-specific, small buckets;
* the distinct candidates are verified in one vectorised numpy comparison of
  their signatures (estimated Jaccard = share of equal minhash rows).

Hence the cost per record is bounded (<= BANDS*BUCKET_CAP signature rows),
not ~40 Python-level checks that grow with the crawl.  State per *kept*
record: its signature row (NUM_PERM*4 bytes), its id and <= BANDS dict
entries; never the texts.

Written with numpy rather than `datasketch` or `rensa`: docs/decisions.md
(section "Near-duplicate detection") has the measured comparison.  On the
generated dumps near duplicates score J >= 0.83 and the most similar distinct
articles J <= 0.61, hence THRESHOLD 0.8.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

NUM_PERM = 128  # estimated-Jaccard sd ~0.035 at J 0.85 (64 rows: ~0.05, which missed a near duplicate)
BANDS, ROWS = 16, 4  # LSH on the first 64 rows: P(candidate) = 1-(1-J^4)^16 -> 0.5 at J~0.5, >0.99 at J>=0.8
SHINGLE = 5
THRESHOLD = 0.8  # estimated Jaccard at or above which a later record is a near duplicate
BUCKET_CAP = 8  # kept records remembered per band value (template bands saturate; see above)
_rng = np.random.default_rng(20240229)  # fixed: signatures must agree across runs and processes
# shingle hashes are mixed once (murmur3's 32-bit finaliser), then each row is the bijection
# x -> a*x + b (mod 2^32), a odd: uint32 arithmetic that numpy wraps exactly as the scheme wants,
# half the memory traffic of 64-bit multiply-shift (measured: unbiased, sd as binomial)
_A = (_rng.integers(0, 1 << 32, NUM_PERM, dtype=np.uint64).astype(np.uint32) | np.uint32(1))[:, None]
_B = _rng.integers(0, 1 << 32, NUM_PERM, dtype=np.uint64).astype(np.uint32)[:, None]
# band key = sum of the band's rows times random odd 64-bit multipliers + a per-band salt (mod 2^64);
# a collision only adds a candidate, which the signature comparison then rejects
_BAND_MUL = _rng.integers(0, 1 << 63, ROWS, dtype=np.uint64) << np.uint64(1) | np.uint64(1)
_BAND_SALT = _rng.integers(0, 1 << 63, BANDS, dtype=np.uint64)
_U32 = np.uint32
MAX_SIGNED_CHARS = 100_000  # near-duplicate signatures look at a body's first 100k characters
_CHUNK = 4096  # shingles per (perm x shingle) block
_BUF = np.empty((_CHUNK, NUM_PERM), dtype=np.uint32)  # reused by `signature` (one per process)
_AT, _BT = _A.ravel().copy(), _B.ravel().copy()  # the same rows as 1-d vectors


def _fold_table() -> dict[int, str | None]:
    table: dict[int, str | None] = {c: chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)}  # ！..～ -> !..~
    table.update(
        {
            ord(k): v
            for k, v in {
                "。": ".",
                "．": ".",
                "、": ",",
                "“": '"',
                "”": '"',
                "„": '"',
                "‘": "'",
                "’": "'",
                "「": '"',
                "」": '"',
                "『": '"',
                "』": '"',
                "【": "[",
                "】": "]",
                "〔": "[",
                "〕": "]",
                "《": "<",
                "》": ">",
                "〈": "<",
                "〉": ">",
                "—": "-",
                "–": "-",
                "―": "-",
                "〜": "~",
            }.items()
        }
    )
    table.update({c: None for c in range(0x3001) if chr(c).isspace()})
    table.update({c: None for c in (0x3000, 0xFEFF, 0x200B)})
    return table


_FOLD = _fold_table()
_FOLD_CP = np.arange(0x10000, dtype=np.uint32)  # the same folding on code points; 0 = dropped
for _c, _v in _FOLD.items():
    _FOLD_CP[_c] = 0 if _v is None else ord(_v)
_FOLD_CP[0] = 0
_FOLD_ALL = np.arange(0x110000, dtype=np.uint32)  # every code point (astral ones unchanged): one lookup
_FOLD_ALL[:0x10000] = _FOLD_CP


def fold_for_signature(text: str) -> str:
    """The text near-duplicate detection compares: full-width punctuation/letters folded to
    half-width (`，`->`,`, `（`->`(`, `。`->`.`, `“”`->`"`), all whitespace removed."""
    return text.translate(_FOLD)


@dataclass(frozen=True)
class Signature:
    exact: bytes  # digest of the normalised title+body
    minhash: bytes  # NUM_PERM uint32 values, little-endian
    bands: tuple[int, ...] = ()  # BANDS 64-bit band keys (computed with the minhash, in the worker)

    def __reduce__(self):  # pickled worker -> parent per record: a plain tuple, not a field dict
        return Signature, (self.exact, self.minhash, self.bands)


def _folded_codepoints(text: str) -> np.ndarray:
    """`fold_for_signature(text)` as uint32 code points, vectorised (a table lookup and a mask)."""
    folded = _FOLD_ALL[np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)]
    return folded[folded != 0]


def shingle_hashes(cps: np.ndarray, k: int = SHINGLE, distinct: bool = True) -> np.ndarray:
    """Mixed 32-bit hashes of every k-gram of code points (deterministic across processes);
    distinct unless `distinct=False` (the minimum over them is the same either way)."""
    if len(cps) < k:
        cps = np.pad(cps, (0, k - len(cps)))
    n = len(cps) - k + 1
    h = cps[:n].copy()
    for j in range(1, k):  # polynomial hash mod 2^32
        h *= _U32(1_000_003)
        h += cps[j : n + j]
    if distinct or n > _CHUNK:
        h = np.unique(h)  # a set: repeated shingles (pagination loops) cost once
    h ^= h >> _U32(16)  # murmur3 fmix32: the polynomial hash is linear, the rows below are too
    h *= _U32(0x85EBCA6B)
    h ^= h >> _U32(13)
    h *= _U32(0xC2B2AE35)
    h ^= h >> _U32(16)
    return h


def band_keys(mins: np.ndarray) -> tuple[int, ...]:
    """BANDS 64-bit keys of a signature's first BANDS*ROWS rows."""
    rows = mins[: BANDS * ROWS].astype(np.uint64).reshape(BANDS, ROWS)
    return tuple(((rows * _BAND_MUL).sum(axis=1, dtype=np.uint64) + _BAND_SALT).tolist())


def signature(title: str, body: str) -> Signature:
    """Exact digest of title+body, the MinHash of the folded body's character shingles, band keys."""
    exact = hashlib.blake2b(f"{title}\n{body}".encode("utf-8", "surrogatepass"), digest_size=16).digest()
    cps = _folded_codepoints(body[:MAX_SIGNED_CHARS])
    if not len(cps):
        cps = _folded_codepoints(title)
    # np.unique (a sort) only where repeats can matter: the median body is ~300 shingles, for
    # which numpy's per-call overhead and temporaries, not arithmetic, are the cost (profiled);
    # the (shingle x perm) block is laid out so that the min runs down contiguous rows (SIMD)
    sh = shingle_hashes(cps, distinct=False)
    mins = None
    for start in range(0, len(sh), _CHUNK):  # chunks keep the block small; one reused buffer
        part = sh[start : start + _CHUNK]
        m = _BUF[: len(part)]
        np.multiply(part[:, None], _AT, out=m)
        m += _BT
        low = m.min(axis=0)
        mins = low if mins is None else np.minimum(mins, low, out=mins)
    mins = mins.astype("<u4", copy=False)
    return Signature(exact, mins.tobytes(), band_keys(mins))


def jaccard(a: bytes, b: bytes) -> float:
    """Estimated Jaccard similarity of two MinHash signatures."""
    return float(np.mean(np.frombuffer(a, "<u4") == np.frombuffer(b, "<u4")))


class Deduper:
    """Remembers kept records; `check` returns None for new content, else (kind, id of the original).

    Deterministic: the answer depends only on the sequence of `check` calls, so
    feeding records in input order gives the same result for any worker count.
    Among verified near candidates the most similar wins, ties to the earliest kept."""

    def __init__(self, threshold: float = THRESHOLD, bucket_cap: int = BUCKET_CAP):
        self.threshold = threshold
        self.bucket_cap = bucket_cap
        self._need = int(np.ceil(threshold * NUM_PERM - 1e-9))  # equal rows needed
        self._exact: dict[bytes, str] = {}
        self._buckets: dict[int, int | list[int]] = {}  # band key -> kept index, or a list of <= cap
        self._sigs = np.empty((1024, NUM_PERM), dtype="<u4")
        self._ids: list[str] = []
        self.verified = 0  # candidate signatures compared so far (the work that must stay per-record bounded)

    def __len__(self) -> int:
        return len(self._ids)

    def check(self, rid: str, sig: Signature) -> tuple[str, str] | None:
        orig = self._exact.get(sig.exact)
        if orig is not None:
            return "exact", orig
        keys = sig.bands or band_keys(np.frombuffer(sig.minhash, "<u4"))
        buckets = self._buckets
        get = buckets.get
        cands: set[int] = set()
        for key in keys:
            hit = get(key)
            if hit is not None:
                if type(hit) is int:
                    cands.add(hit)
                else:
                    cands.update(hit)
        mine = np.frombuffer(sig.minhash, "<u4")
        if cands:
            # the parent's serial work per record (profiled): plain ndarray methods, not the
            # np.count_nonzero/np.argmax wrappers
            idx = sorted(cands)
            equal = (self._sigs[idx] == mine).sum(axis=1)
            self.verified += len(idx)
            best = int(equal.argmax())  # first maximum: the earliest kept among the most similar
            if equal[best] >= self._need:
                return f"near (J~{equal[best] / NUM_PERM:.2f})", self._ids[idx[best]]
        j = len(self._ids)
        if j == len(self._sigs):
            self._sigs = np.concatenate([self._sigs, np.empty_like(self._sigs)])
        self._sigs[j] = mine
        self._ids.append(rid)
        self._exact[sig.exact] = rid
        cap = self.bucket_cap
        for key in keys:
            hit = buckets.get(key)
            if hit is None:
                buckets[key] = j
            elif type(hit) is int:
                buckets[key] = [hit, j]
            elif len(hit) < cap:
                hit.append(j)
        return None
