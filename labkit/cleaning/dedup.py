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
_BUF = np.empty((NUM_PERM, _CHUNK), dtype=np.uint32)  # reused by `signatures` (one per process)
_BACK = np.arange(1, SHINGLE)  # a record's last k-1 shingle starts, counted back from its end


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


def _shingle_hashes(cps: list[np.ndarray]) -> tuple[np.ndarray, list[int]]:
    """Mixed 32-bit hashes of every k-gram of each record's code points (a record shorter than k is padded
    with zeros to one k-gram), all records' concatenated, and how many each record has."""
    cps = [c if len(c) >= SHINGLE else np.pad(c, (0, SHINGLE - len(c))) for c in cps]
    lens = [len(c) for c in cps]
    cat = np.concatenate(cps) if len(cps) > 1 else cps[0]
    n = len(cat) - SHINGLE + 1
    h = cat[:n].copy()
    for j in range(1, SHINGLE):  # polynomial hash mod 2^32
        h *= _U32(1_000_003)
        h += cat[j : n + j]
    if len(cps) > 1:  # drop the k-grams that straddle two records
        ends = np.cumsum(lens[:-1])
        keep = np.ones(n, dtype=bool)
        keep[(ends[:, None] - _BACK).ravel()] = False
        h = h[keep]
    h ^= h >> _U32(16)  # murmur3 fmix32: the polynomial hash is linear, the rows below are too
    h *= _U32(0x85EBCA6B)
    h ^= h >> _U32(13)
    h *= _U32(0xC2B2AE35)
    h ^= h >> _U32(16)
    return h, [m - SHINGLE + 1 for m in lens]


def _block(hashes: np.ndarray) -> np.ndarray:
    """The (perm x shingle) values a*x + b (mod 2^32) of up to _CHUNK shingle hashes, in the reused buffer."""
    block = _BUF[:, : len(hashes)]
    np.multiply(_A, hashes, out=block)
    block += _B
    return block


def _minhashes(hashes: np.ndarray, counts: list[int]) -> np.ndarray:
    """(records x NUM_PERM) minima: consecutive records whose shingles fit one block share it (one
    `minimum.reduceat` along its rows); a record with more shingles is reduced alone, block by block,
    after `np.unique` (pagination loops repeat shingles; the minimum is the same)."""
    out = np.empty((len(counts), NUM_PERM), dtype=np.uint32)
    i, at = 0, 0
    while i < len(counts):
        j, size = i + 1, counts[i]
        while j < len(counts) and size + counts[j] <= _CHUNK:
            size += counts[j]
            j += 1
        part = hashes[at : at + size]
        if size > _CHUNK:
            part = np.unique(part)
            low = _block(part[:_CHUNK]).min(axis=1)
            for start in range(_CHUNK, len(part), _CHUNK):
                np.minimum(low, _block(part[start : start + _CHUNK]).min(axis=1), out=low)
            out[i] = low
        else:
            offsets = np.cumsum([0, *counts[i : j - 1]])
            out[i:j] = np.minimum.reduceat(_block(part), offsets, axis=1).T
        i, at = j, at + size
    return out


def band_keys(mins: np.ndarray) -> tuple[int, ...]:
    """BANDS 64-bit keys of a signature's first BANDS*ROWS rows."""
    return _band_keys(mins[None, :])[0]


def _band_keys(mins: np.ndarray) -> list[tuple[int, ...]]:
    rows = mins[:, : BANDS * ROWS].astype(np.uint64).reshape(len(mins), BANDS, ROWS)
    return [tuple(k) for k in ((rows * _BAND_MUL).sum(axis=2, dtype=np.uint64) + _BAND_SALT).tolist()]


def signatures(records: list[tuple[str, str]]) -> list[Signature]:
    """`signature(title, body)` of each record, computed together (the same values): for a body of a few
    hundred characters numpy's per-call overhead, not arithmetic, was most of a signature's cost (profiled),
    and a batch pays it once. The (perm x shingle) block has the records' shingles along its rows, so
    the multiply, the add and the per-record minima run over long contiguous rows."""
    if not records:
        return []
    exact, cps = [], []
    for title, body in records:
        exact.append(hashlib.blake2b(f"{title}\n{body}".encode("utf-8", "surrogatepass"), digest_size=16).digest())
        c = _folded_codepoints(body[:MAX_SIGNED_CHARS])
        cps.append(c if len(c) else _folded_codepoints(title))
    mins = _minhashes(*_shingle_hashes(cps)).astype("<u4", copy=False)
    return [Signature(e, m.tobytes(), k) for e, m, k in zip(exact, mins, _band_keys(mins))]


def signature(title: str, body: str) -> Signature:
    """Exact digest of title+body, the MinHash of the folded body's character shingles, band keys."""
    return signatures([(title, body)])[0]


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
