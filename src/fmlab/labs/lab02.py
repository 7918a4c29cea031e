"""Checks for labs/lab_02_data.ipynb: near-duplicate removal written by hand, share-nothing, on 1, 2 and 4
gloo processes: MinHash signatures, LSH band keys, and a distributed dedup step whose output must not depend
on how many ranks ran it.

    lab02.check_minhash(shingles, minhash)   # ex1: shingle sets and signatures against the reference, in-process
    lab02.check_bands(band_hashes)           # ex2: band keys: equal exactly when the band's rows are equal,
                                             #      the band index included, the same in a fresh Python process
    lab02.check_dedup(dedup, work)           # ex3: your dedup on worlds of 1, 2 and 4 processes
    lab02.summary()                          # raises LabIncomplete while any check fails

The given pieces live here, so that the notebook and its checks cannot drift apart: the corpus (`corpus()`:
the 154 sonnets and a sample of paragraphs of the Python documentation shipped in data/corpus, plus planted
near-duplicates and "related" documents, shuffled with a fixed seed), the share-nothing split (`docs_of`: doc i
goes to rank i % world_size), the hash family (`hash_params`), the constants (K, NUM_PERM, SEED, BANDS, ROWS,
THRESHOLD) and `estimated_jaccard`. `reference_*` functions are the lab's own solution.

How the checks compare. Shingles, signatures and the kept ids are integers and sets: compared exactly
(tolerance 0). Exercise 1 compares your signatures with the reference's, computed from the reference's
shingles so that a shingling bug and a hashing bug are told apart. Exercise 2 cannot compare keys with the
reference's (any stable hash will do): it checks what the keys must do, on the corpus's signatures. Exercise 3
runs `dedup` on 1, 2 and 4 forked gloo processes (`fmlab.labs.world`), takes the union of the ids the ranks
keep, and compares it with the reference run on one process: the kept copy of each cluster of near-duplicates
is its smallest id, every other copy is removed, nothing else is.

One thing forked processes cannot show: they inherit this kernel's salt for Python's `hash()` of strings,
so a signature built on `hash()` agrees across the ranks of the check, and would not across the separately
started processes or instances of a real job. Exercise 1 catches that by comparing with the reference's
hash (zlib.crc32), exercise 2 by running your band_hashes once more in a fresh Python interpreter (shipped
there with cloudpickle, which the SageMaker SDK installs; without it that row is skipped).

The solved lab's checks take about 5-10 s on 2 cores (measured on a shared, noisy machine), most of it exercise
3's three worlds (1 + 2 + 4 processes), whose ranks sign their documents in pure Python.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import random
import re
import subprocess
import sys
import time
import zlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral
from pathlib import Path

import numpy as np

from fmlab.labs import Lab

LAB = Lab("lab 02", ["ex1_minhash", "ex2_band_keys", "ex3_distributed_dedup"])

# The dedup every check runs.
K = 3  # words per shingle
NUM_PERM = 128  # signature length: one value per hash function
SEED = 2  # picks the hash functions (hash_params)
BANDS, ROWS = 32, 4  # LSH: 32 bands of 4 rows = 128 values
THRESHOLD = 0.5  # a candidate pair is a duplicate when its estimated Jaccard is at least this
PRIME = (1 << 31) - 1  # the universal hash (a*x + b) % PRIME; a*x + b < 2**64, so numpy uint64 is exact too
WORLD_SIZES = (1, 2, 4)
CORPUS_SEED = 20240502
WORLD_TIMEOUT = 60.0


# ---------------------------------------------------------------- the given pieces: corpus, split, hash family


@dataclass(frozen=True)
class Corpus:
    """The lab's documents: texts[i] is document i (its global id)."""

    texts: tuple[str, ...]
    clusters: tuple[tuple[int, ...], ...]  # planted near-duplicates: an original and its copies, ids ascending
    related: tuple[tuple[int, int], ...]  # (mash-up, parent): half of the parent's text, not a duplicate
    sources: tuple[str, ...]  # where each document came from, e.g. "sonnet 18", "copy of 12"

    def __len__(self) -> int:
        return len(self.texts)


def _sonnets() -> list[str]:
    from fmlab.data.corpus import CORPUS_DIR

    text = (CORPUS_DIR / "shakespeare" / "sonnets_gut.txt").read_text(encoding="utf-8")
    parts = re.split(r"\n\s*\n\s*[IVXLC]+\s*\n\s*\n", text)[1:]  # [0] is the title
    return [p.strip() for p in parts]


def _doc_paragraphs(every: int = 4) -> list[str]:
    from fmlab.data.corpus import CORPUS_DIR

    found = []
    for f in sorted((CORPUS_DIR / "python-docs").glob("*.txt")):
        for p in re.split(r"\n\s*\n", f.read_text(encoding="utf-8")):
            if len(re.findall(r"\w+", p)) >= 40 and not p.startswith("   "):  # prose, not grammar or code
                found.append(p.strip())
    return found[::every]


def _edit_words(text: str, rng: random.Random, changes: int, vocabulary: Sequence[str]) -> str:
    """Replace `changes` words of `text` with others, keeping its line breaks."""
    tokens = re.split(r"(\s+)", text)
    words = [i for i, t in enumerate(tokens) if re.fullmatch(r"[A-Za-z]+", t)]
    for i in rng.sample(words, min(changes, len(words))):
        tokens[i] = rng.choice(vocabulary)
    return "".join(tokens)


def _restyle(text: str, style: str) -> str:
    """A copy as another crawl or another editor would have it: other case, other whitespace."""
    if style == "upper":
        return text.upper()
    if style == "lower":
        return text.lower()
    if style == "one-line":
        return " ".join(text.split())
    if style == "spaced":
        return text.replace(" ", "  ").replace("\n", "\n\n")
    return text


@functools.lru_cache(maxsize=1)
def corpus() -> Corpus:
    """The lab's corpus, the same on every call and every machine: built from the shipped files with fixed seeds.

    About 250 distinct documents (sonnets and paragraphs of the Python docs), 30 of them copied once or twice
    with a few words changed and their case or whitespace changed (the planted near-duplicates), and 10
    mash-ups of two documents' halves (similar to their parents, Jaccard about 0.3: not duplicates)."""
    rng = random.Random(CORPUS_SEED)
    base: list[tuple[str, str]] = []
    kept: list[set[str]] = []
    for label, text in [(f"sonnet {i + 1}", t) for i, t in enumerate(_sonnets())] + \
                       [(f"python docs paragraph {i}", t) for i, t in enumerate(_doc_paragraphs())]:
        s = reference_shingles(text, K)
        if all(_jaccard(s, other) < 0.2 for other in kept):  # the source's own near-duplicates are left out
            base.append((label, text))
            kept.append(s)
    vocabulary = sorted({w for _, t in base for w in re.findall(r"[a-z]+", t.lower()) if len(w) > 3})
    docs = list(base)  # (source, text); index = position before the shuffle
    clusters: list[list[int]] = []
    styles = ["upper", "lower", "one-line", "spaced", "none"]
    for n, original in enumerate(rng.sample(range(len(base)), 30)):
        members = [original]
        for c in range(2 if n < 10 else 1):
            words = len(re.findall(r"\w+", base[original][1]))
            changes = 0 if (n + c) % 7 == 0 else max(1, words // 25)  # some copies differ only in case/whitespace
            text = _restyle(_edit_words(base[original][1], rng, changes, vocabulary), styles[(n + c) % len(styles)])
            members.append(len(docs))
            docs.append((f"copy of {base[original][0]}", text))
        clusters.append(members)
    in_clusters = {m for c in clusters for m in c}
    related: list[tuple[int, int]] = []
    singles = [i for i in range(len(base)) if i not in in_clusters]
    for _ in range(10):
        a, b = rng.sample(singles, 2)
        la, lb = base[a][1].splitlines(), base[b][1].splitlines()
        text = "\n".join(la[: len(la) // 2] + lb[len(lb) // 2:])
        related += [(len(docs), a), (len(docs), b)]
        docs.append((f"first half of {base[a][0]}, second half of {base[b][0]}", text))
    order = list(range(len(docs)))
    rng.shuffle(order)
    new_id = {old: new for new, old in enumerate(order)}
    return Corpus(texts=tuple(docs[old][1] for old in order),
                  clusters=tuple(sorted(tuple(sorted(new_id[m] for m in c)) for c in clusters)),
                  related=tuple(sorted((new_id[x], new_id[p]) for x, p in related)),
                  sources=tuple(docs[old][0] for old in order))


def docs_of(rank: int, world_size: int) -> tuple[list[str], list[int]]:
    """This rank's share, share-nothing: document i goes to rank i % world_size. Returns (texts, ids)."""
    c = corpus()
    ids = list(range(rank, len(c), world_size))
    return [c.texts[i] for i in ids], ids


def hash_params(num_perm: int, seed: int) -> tuple[list[int], list[int]]:
    """The hash family of the signatures: h_i(x) = (a[i] * x + b[i]) % PRIME, with 1 <= a < PRIME, 0 <= b < PRIME."""
    rng = random.Random(seed)
    a = [rng.randrange(1, PRIME) for _ in range(num_perm)]
    b = [rng.randrange(0, PRIME) for _ in range(num_perm)]
    return a, b


def estimated_jaccard(sig_a: Sequence[int], sig_b: Sequence[int]) -> float:
    """The fraction of positions where two signatures agree: an unbiased estimate of the Jaccard similarity."""
    return sum(int(x) == int(y) for x, y in zip(sig_a, sig_b, strict=True)) / len(sig_a)


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def exact_jaccard(text_a: str, text_b: str, k: int = K) -> float:
    """|A ∩ B| / |A ∪ B| of the two texts' shingle sets (the reference's shingles)."""
    return _jaccard(reference_shingles(text_a, k), reference_shingles(text_b, k))


def candidate_probability(similarity: float, bands: int = BANDS, rows: int = ROWS) -> float:
    """The chance that a pair of this Jaccard similarity shares at least one band key: 1 - (1 - s**r)**b."""
    return 1 - (1 - similarity**rows) ** bands


# ---------------------------------------------------------------- the lab's own solution


def reference_shingles(text: str, k: int) -> set[str]:
    """The set of k-word shingles of `text`: lower-cased words (runs of \\w), joined by one space."""
    words = re.findall(r"\w+", text.lower())
    if len(words) < k:
        return {" ".join(words)} if words else set()
    return {" ".join(words[i:i + k]) for i in range(len(words) - k + 1)}


def reference_minhash(shingle_set, num_perm: int, seed: int) -> list[int]:
    """The MinHash signature: for each hash function h_i, the smallest h_i(crc32(shingle)) over the set."""
    a, b = _hash_arrays(num_perm, seed)
    xs = np.array([zlib.crc32(s.encode("utf-8")) for s in shingle_set], dtype=np.uint64)
    if not len(xs):
        return [PRIME] * num_perm  # nothing is smaller
    return ((a * xs[None, :] + b) % PRIME).min(axis=1).tolist()  # exact: a * x + b < 2**64


@functools.lru_cache(maxsize=8)
def _hash_arrays(num_perm: int, seed: int):
    a, b = hash_params(num_perm, seed)
    return np.array(a, dtype=np.uint64)[:, None], np.array(b, dtype=np.uint64)[:, None]


def reference_band_hashes(signature: Sequence[int], bands: int, rows: int) -> list[int]:
    """One key per band: a stable 63-bit hash of (band index, the band's rows)."""
    keys = []
    for band in range(bands):
        rows_of_band = tuple(int(v) for v in signature[band * rows:(band + 1) * rows])
        digest = hashlib.blake2b(repr((band, rows_of_band)).encode(), digest_size=8).digest()
        keys.append(int.from_bytes(digest, "big") >> 1)  # below 2**63: fits an int64 tensor
    return keys


def _kept(records: dict[int, tuple[Sequence[int], Sequence[int]]]) -> set[int]:
    """{doc id: (signature, band keys)} of every document -> the ids kept: the smallest of each cluster."""
    buckets: dict[tuple[int, int], list[int]] = defaultdict(list)
    for doc_id in sorted(records):
        for band, key in enumerate(records[doc_id][1]):
            buckets[(band, key)].append(doc_id)
    parent = {d: d for d in records}

    def find(d: int) -> int:
        while parent[d] != d:
            parent[d] = parent[parent[d]]
            d = parent[d]
        return d

    for members in buckets.values():
        for i, x in enumerate(members):
            for y in members[i + 1:]:
                if estimated_jaccard(records[x][0], records[y][0]) >= THRESHOLD:
                    rx, ry = find(x), find(y)
                    parent[max(rx, ry)] = min(rx, ry)  # the root of a cluster is its smallest id
    return {d for d in records if find(d) == d}


def reference_dedup(texts: Sequence[str], ids: Sequence[int], rank: int, world_size: int) -> list[int]:
    """The lab's solution to exercise 3: this rank's kept ids, ascending."""
    import torch.distributed as dist

    mine = []
    for doc_id, text in zip(ids, texts, strict=True):
        sig = reference_minhash(reference_shingles(text, K), NUM_PERM, SEED)
        mine.append((doc_id, sig, reference_band_hashes(sig, BANDS, ROWS)))
    everyone: list = [None] * world_size
    dist.all_gather_object(everyone, mine)
    records = {doc_id: (sig, keys) for part in everyone for doc_id, sig, keys in part}
    kept = _kept(records)
    return sorted(d for d in ids if d in kept)


@functools.lru_cache(maxsize=1)
def reference_signatures() -> tuple[tuple[int, ...], ...]:
    """The reference signature of every document of the corpus, by id."""
    return tuple(tuple(reference_minhash(reference_shingles(t, K), NUM_PERM, SEED)) for t in corpus().texts)


@functools.lru_cache(maxsize=1)
def reference_kept() -> frozenset[int]:
    """The ids a correct dedup keeps, computed in this process."""
    sigs = reference_signatures()
    return frozenset(_kept({i: (s, reference_band_hashes(s, BANDS, ROWS)) for i, s in enumerate(sigs)}))


# ---------------------------------------------------------------- exercise 1: shingles and MinHash


SHINGLE_CASES = [
    "To be, or not to be: that is the question.",
    "TO  BE, OR NOT\nTO BE:\tthat is the question!",
    "When forty winters shall besiege thy brow",
    "Python's \"yield\" statement, and yield-from",
    "Two words",
    "",
]

MINHASH_HINT = ("words = re.findall(r\"\\w+\", text.lower()); the shingles are the k-word windows joined by one space; "
                "minhash: x = zlib.crc32(shingle.encode()) for each shingle, a, b = lab02.hash_params(num_perm, seed), "
                "and value i of the signature is the min over the shingles of (a[i] * x + b[i]) % lab02.PRIME")


def _show(items, limit: int = 3) -> str:
    items = sorted(items)
    more = f" (+{len(items) - limit} more)" if len(items) > limit else ""
    return ", ".join(repr(i) for i in items[:limit]) + more


def _shingle_problem(shingles) -> str:
    texts = list(SHINGLE_CASES) + list(corpus().texts[:40])
    for text in texts:
        for k in (K, 5):
            got = shingles(text, k)
            want = reference_shingles(text, k)
            try:
                got = set(got)
            except TypeError:
                return f"shingles(...) returned {type(got).__name__}: return a set of strings"
            if got != want:
                shown = text if len(text) <= 50 else text[:47] + "..."
                return (f"shingles({shown!r}, {k}) gave {len(got)} shingles, expected {len(want)}; missing: "
                        f"{_show(want - got) or 'none'}; unexpected: {_show(got - want) or 'none'}")
    return ""


def _as_ints(sig) -> list[int]:
    out = list(sig)
    if not all(isinstance(v, Integral) for v in out):
        raise TypeError(f"a signature holds integers, got {type(out[0]).__name__}" if out else "an empty signature")
    return [int(v) for v in out]


def _minhash_problem(minhash, sample: Sequence[int]) -> tuple[str, list[str]]:
    c = corpus()
    ref = reference_signatures()
    rows = []
    pairs = [(c.clusters[n][0], c.clusters[n][1]) for n in range(0, len(c.clusters), 3)] + list(c.related[:6])
    mine: dict[int, list[int]] = {}
    for i in sorted(set(sample) | {d for p in pairs for d in p}):
        try:
            sig = _as_ints(minhash(reference_shingles(c.texts[i], K), NUM_PERM, SEED))
        except TypeError as e:
            return f"minhash(...) for document {i}: {e}", rows
        if len(sig) != NUM_PERM:
            return (f"minhash(..., num_perm={NUM_PERM}, seed={SEED}) returned {len(sig)} values, expected "
                    f"{NUM_PERM}"), rows
        mine[i] = sig
    worst = 0.0
    for x, y in pairs:
        est = estimated_jaccard(mine[x], mine[y])
        true = exact_jaccard(c.texts[x], c.texts[y])
        worst = max(worst, abs(est - true))
        rows.append(f"  docs {x:3d} and {y:3d}: Jaccard {true:.2f}, your signatures estimate {est:.2f}")
    for i in sample:
        if mine[i] != list(ref[i]):
            at = next(j for j, (g, w) in enumerate(zip(mine[i], ref[i], strict=True)) if g != w)
            wrong = sum(g != w for g, w in zip(mine[i], ref[i], strict=True))
            differ = (f"document {i}'s signature differs from the reference's at {wrong} "
                      f"of {NUM_PERM} positions (first: position {at}, {mine[i][at]} instead of {ref[i][at]})")
            one = sorted(reference_shingles(c.texts[i], K))[0]
            if _as_ints(minhash({one}, NUM_PERM, SEED)) == reference_minhash({one}, NUM_PERM, SEED):
                return (differ + ". For a set of one shingle your values equal the reference's, so the hash is "
                        "right and the reduction is not: value i is the smallest h_i over all the shingles"), rows
            if worst <= 0.15:
                return (differ + f". Your signatures still estimate Jaccard well (within {worst:.2f}): a valid MinHash, "
                        "but with another hash of the shingles, as a one-shingle set shows. Use "
                        "zlib.crc32(shingle.encode()): Python's hash() of a string is salted per process "
                        "(PYTHONHASHSEED), so two processes, or two instances of a Processing job, would get different "
                        "signatures for the same text and never find their duplicates"), rows
            return differ + f", and its Jaccard estimates are off by up to {worst:.2f}", rows
    for num_perm, seed in ((16, 7), (5, 0)):
        text = c.texts[sample[0]]
        got = _as_ints(minhash(reference_shingles(text, K), num_perm, seed))
        if got != reference_minhash(reference_shingles(text, K), num_perm, seed):
            return (f"minhash(..., num_perm={num_perm}, seed={seed}) differs from the reference: use the arguments, "
                    "not the lab's constants"), rows
    return "", rows


def check_minhash(shingles, minhash) -> bool:
    ex = "ex1_minhash"
    if not callable(shingles) or not callable(minhash):
        return LAB.report(ex, False, "give the functions shingles and minhash themselves (no parentheses)")
    try:
        problem = _shingle_problem(shingles)
        rows: list[str] = []
        if not problem:
            problem, rows = _minhash_problem(minhash, range(0, len(corpus()), 6))
    except NotImplementedError:
        return LAB.report(ex, False, f"not answered yet. Hint: {MINHASH_HINT}")
    except Exception as e:  # a bug in the answer is a failed check, not a crash
        problem = f"your code raised {type(e).__name__}: {e}"
    if problem:
        return LAB.report(ex, False, f"{problem}. Hint: {MINHASH_HINT}")
    n = len(range(0, len(corpus()), 6))
    return LAB.report(ex, True, f"shingle sets equal the reference's, and {n} signatures equal it at all {NUM_PERM} "
                      "positions; the estimates on planted and related pairs:\n" + "\n".join(rows))


# ---------------------------------------------------------------- exercise 2: band keys


BANDS_HINT = ("key b = a stable hash of (b, the rows signature[b * rows:(b + 1) * rows]), e.g. "
              "int.from_bytes(hashlib.blake2b(repr((b, tuple(band))).encode(), digest_size=8).digest(), \"big\"); "
              "not Python's hash() of a string")


def _fresh_process_keys(band_hashes, calls: list[tuple]) -> tuple[list | None, str]:
    """Run band_hashes on `calls` in a new Python interpreter with another hash salt: (results, why not)."""
    try:
        import cloudpickle
    except ImportError:
        return None, "not checked: cloudpickle is not installed"
    try:
        payload = cloudpickle.dumps((band_hashes, calls))
    except Exception as e:
        return None, f"not checked: your function could not be shipped to another process ({type(e).__name__})"
    program = ("import json, pickle, sys\n"
               "sys.path[:0] = json.loads(sys.argv[1])\n"
               "import cloudpickle  # noqa: F401  (unpickles functions pickled by value)\n"
               "try:\n"
               "    fn, calls = pickle.loads(sys.stdin.buffer.read())\n"
               "except Exception:\n"
               "    sys.exit(3)\n"
               "sys.stdout.buffer.write(pickle.dumps([[int(k) for k in fn(*c)] for c in calls]))\n")
    salt = os.environ.get("PYTHONHASHSEED", "")
    env = {**os.environ, "PYTHONHASHSEED": str(int(salt) + 1) if salt.isdigit() else "1"}
    try:
        done = subprocess.run([sys.executable, "-c", program, json.dumps(sys.path)], input=payload,
                              capture_output=True, env=env, timeout=60)
    except subprocess.TimeoutExpired:
        return None, "not checked: the fresh process took over 60 s"
    if done.returncode == 3:
        return None, "not checked: your function could not be loaded in another process"
    if done.returncode != 0:
        last = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        return [], f"in a fresh Python process, band_hashes raised: {last[0]}"
    return pickle.loads(done.stdout), ""


def _keys(band_hashes, sig, bands, rows) -> list[int]:
    keys = list(band_hashes(list(sig), bands, rows))
    if len(keys) != bands:
        raise ValueError(f"band_hashes(signature of {len(sig)} values, bands={bands}, rows={rows}) returned "
                         f"{len(keys)} keys, expected {bands}: one per band")
    if not all(isinstance(k, Integral) for k in keys):
        raise ValueError(f"a band key must be an int (it is gathered and compared), got "
                         f"{type(next(k for k in keys if not isinstance(k, Integral))).__name__}")
    return [int(k) for k in keys]


def _bands_problem(band_hashes) -> tuple[str, list[str]]:
    c, sigs = corpus(), reference_signatures()
    rng = random.Random(1)
    pairs = [(cl[0], m) for cl in c.clusters for m in cl[1:]] + [(x, p) for x, p in c.related]
    pairs += [tuple(rng.sample(range(len(c)), 2)) for _ in range(100)]
    keys = {i: _keys(band_hashes, sigs[i], BANDS, ROWS) for i in sorted({d for p in pairs for d in p})}
    if keys[pairs[0][0]] != _keys(band_hashes, sigs[pairs[0][0]], BANDS, ROWS):
        return "two calls on the same signature gave different keys: the keys must be deterministic", []
    shared = 0
    for x, y in pairs:
        for b in range(BANDS):
            same_rows = sigs[x][b * ROWS:(b + 1) * ROWS] == sigs[y][b * ROWS:(b + 1) * ROWS]
            same_key = keys[x][b] == keys[y][b]
            shared += same_rows
            if same_rows != same_key:
                rows_x, rows_y = sigs[x][b * ROWS:(b + 1) * ROWS], sigs[y][b * ROWS:(b + 1) * ROWS]
                if same_rows:
                    return (f"documents {x} and {y} have the same rows {rows_x} in band {b}, but different keys: the "
                            f"key of band {b} must depend on those {ROWS} rows (and b) only"), []
                return (f"documents {x} and {y} get the same key in band {b}, but their rows differ ({rows_x} and "
                        f"{rows_y}): hash the band's rows, signature[b * rows:(b + 1) * rows]"), []
    repeated = [7, 8, 9, 10] * BANDS
    same = _keys(band_hashes, repeated, BANDS, ROWS)
    if len(set(same)) < BANDS:
        b1, b2 = next((i, j) for i in range(BANDS) for j in range(i + 1, BANDS) if same[i] == same[j])
        return (f"a signature whose bands all hold the rows (7, 8, 9, 10) got the same key in band {b1} and band "
                f"{b2}: a document's band {b1} would then collide with another's band {b2}, which LSH never compares. "
                "Put the band index b into what you hash"), []
    for n, bands, rows in ((16, 4, 4), (16, 8, 2)):
        got = _keys(band_hashes, sigs[0][:n], bands, rows)
        distinct = len({tuple(sigs[0][b * rows:(b + 1) * rows]) for b in range(bands)})
        if len(set(got)) != len(got) and distinct == bands:
            return f"band_hashes(signature of {n}, bands={bands}, rows={rows}) gave equal keys to different bands", []
    calls = [(list(sigs[i]), BANDS, ROWS) for i in list(keys)[:5]] + [(repeated, BANDS, ROWS)]
    fresh, why = _fresh_process_keys(band_hashes, calls)
    rows = [f"  {len(pairs)} pairs of documents x {BANDS} bands: keys equal exactly where the rows are "
            f"({shared} shared bands); the band index is part of the key"]
    if fresh is None:
        rows.append(f"  the same keys in a fresh Python process: {why}")
    elif why:
        return why, rows
    else:
        here = [keys[i] for i in list(keys)[:5]] + [same]
        if fresh != here:
            return ("in a fresh Python process (another hash salt, as on another instance of the job) band_hashes "
                    "gave other keys for the same signatures: the key must not use Python's hash() of a string or "
                    "bytes, which is salted per process. The check's ranks are forked from this kernel and share "
                    "its salt, so exercise 3 would not show it; a real job would find no duplicates across "
                    "instances"), rows
        rows.append("  a fresh Python process (another hash salt) gives the same keys")
    return "", rows


def check_bands(band_hashes) -> bool:
    ex = "ex2_band_keys"
    if not callable(band_hashes):
        return LAB.report(ex, False, "give the function band_hashes itself (no parentheses)")
    try:
        problem, rows = _bands_problem(band_hashes)
    except NotImplementedError:
        return LAB.report(ex, False, f"not answered yet. Hint: {BANDS_HINT}")
    except Exception as e:  # a bug in the answer is a failed check, not a crash
        problem, rows = f"your code raised {type(e).__name__}: {e}", []
    if problem:
        return LAB.report(ex, False, f"{problem}. Hint: {BANDS_HINT}")
    return LAB.report(ex, True, "band keys behave:\n" + "\n".join(rows))


# ---------------------------------------------------------------- exercise 3: the distributed dedup


DEDUP_HINT = ("compute (id, signature, band keys) of this rank's documents, dist.all_gather_object them, put "
              "every document into buckets by (band, key), link the pairs of a bucket whose estimated Jaccard is "
              f">= THRESHOLD ({THRESHOLD}), and keep, of each connected group, the smallest id; return the kept ids "
              "of this rank's own documents")


def _cluster_of() -> dict[int, tuple[int, ...]]:
    return {m: cl for cl in corpus().clusters for m in cl}


def _nearest_candidate(doc: int) -> str:
    """Why `doc` is not a duplicate: the other documents that share one of its band keys, and their estimates."""
    sigs = reference_signatures()
    mine = reference_band_hashes(sigs[doc], BANDS, ROWS)
    found = []
    for other, sig in enumerate(sigs):
        if other != doc and any(k == o for k, o in zip(mine, reference_band_hashes(sig, BANDS, ROWS), strict=True)):
            found.append((estimated_jaccard(sigs[doc], sig), other))
    if not found:
        return "it shares no band key with any other document"
    est, other = max(found)
    return (f"it shares a band key with document {other}, but their estimated Jaccard is {est:.2f}, below "
            f"THRESHOLD {THRESHOLD}: a band collision makes a candidate, not a duplicate")


def _explain(got: set[int], world_size: int) -> list[str]:
    """What differs between the kept ids `got` and the reference's, cluster by cluster, worst first."""
    want = reference_kept()
    cluster_of = _cluster_of()
    out: list[str] = []
    seen: set[tuple[int, ...]] = set()
    for doc in sorted(got ^ want):
        cl = cluster_of.get(doc)
        if cl is None:
            if doc in want:
                out.append(f"document {doc} was removed, but it is not a near-duplicate of anything: "
                           + _nearest_candidate(doc))
            continue
        if cl in seen:
            continue
        seen.add(cl)
        kept = [m for m in cl if m in got]
        ranks = f" ({', '.join(f'{m} on rank {m % world_size}' for m in cl)})" if world_size > 1 else ""
        if len(kept) > 1:
            out.append(f"planted cluster {list(cl)}{ranks}: {len(kept)} copies kept ({kept}), expected only {cl[0]}")
        elif not kept:
            out.append(f"planted cluster {list(cl)}{ranks}: no copy kept, expected {cl[0]}")
        else:
            out.append(f"planted cluster {list(cl)}{ranks}: kept {kept[0]}, expected the smallest id, {cl[0]}")
    out.sort(key=lambda line: ("removed" not in line, "copies kept" not in line))
    return out


def _run(dedup, world_size: int, logs: Path):
    from fmlab.labs.world import run_world

    def fn(rank, ws):
        texts, ids = docs_of(rank, ws)
        return dedup(texts, ids, rank, ws)

    return run_world(fn, logs, world_size=world_size, timeout=WORLD_TIMEOUT)


def _kept_ids(world) -> tuple[set[int] | None, str]:
    kept: set[int] = set()
    for rank, result in enumerate(world.results):
        try:
            ids = [int(i) for i in result]
        except (TypeError, ValueError):
            return None, f"rank {rank} returned {type(result).__name__}: return a list of the ids you keep"
        own = set(range(rank, len(corpus()), world.world_size))
        if not set(ids) <= own:
            return None, (f"rank {rank} returned ids that are not its own ({_show(set(ids) - own)}): each rank returns "
                          "the kept ids of its own documents, as each worker writes only its own shard")
        kept |= set(ids)
    return kept, ""


def check_dedup(dedup, work) -> bool:
    ex = "ex3_distributed_dedup"
    if not callable(dedup):
        return LAB.report(ex, False, "give the function dedup itself (no parentheses)")
    c = corpus()
    want = reference_kept()
    base = Path(work) / "ex3"
    rows, results = [], {}
    for world_size in WORLD_SIZES:
        start = time.perf_counter()
        world = _run(dedup, world_size, base / f"world{world_size}")
        if world.unanswered():
            return LAB.report(ex, False, "not answered yet: dedup still raises NotImplementedError. "
                              f"Hint: {DEDUP_HINT}")
        if not world.ok:
            return LAB.report(ex, False, f"on {world_size} process(es), {world.failure()}. Hint: {DEDUP_HINT}")
        got, why = _kept_ids(world)
        if got is None:
            return LAB.report(ex, False, f"on {world_size} process(es), {why}. Hint: {DEDUP_HINT}")
        results[world_size] = got
        if got != want:
            problems = _explain(got, world_size)
            more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
            if world_size > 1 and results[1] == want:
                lead = (f"your 1-process run is right, but on {world_size} processes the kept ids differ: "
                        f"{len(got - want)} kept that should go, {len(want - got)} removed that should stay. ")
                if any("copies kept" in p for p in problems):
                    lead += ("Duplicates on different ranks survive: each rank must see every rank's band keys "
                             "(dist.all_gather_object) before it decides. ")
                if any("expected the smallest id" in p for p in problems):
                    lead += ("The kept copy depends on where documents live: keep the smallest global id of each "
                             "cluster, whatever the rank or the order the gathered lists arrive in. ")
            else:
                lead = (f"on {world_size} process(es), the kept ids differ from the reference's: {len(got - want)} kept "
                        f"that should go, {len(want - got)} removed that should stay. ")
            return LAB.report(ex, False, lead + "; ".join(problems[:3]) + more + f". Hint: {DEDUP_HINT}")
        rows.append(f"  {world_size} process(es): kept {len(got)} of {len(c)} documents in "
                    f"{time.perf_counter() - start:.1f} s" + (", the same ids as 1 process" if world_size > 1 else ""))
    removed = len(c) - len(want)
    return LAB.report(ex, True, f"every planted copy removed ({removed} documents, {len(c.clusters)} clusters keep "
                      "their smallest id), no distinct document removed, on every world size:\n" + "\n".join(rows))


def summary() -> None:
    LAB.summary()
