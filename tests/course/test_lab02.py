"""Lab 02's checks, without notebooks: the reference passes every check; plausible wrong solutions (the bugs a
learner really writes) fail with a hint that names what differed; an unanswered stub fails as "not answered".
Exercise 3's tests run real worlds of 1, 2 and 4 forked gloo processes (a few seconds each)."""

import hashlib
import re
import zlib
from collections import defaultdict

import pytest
import torch.distributed as dist

from fmlab.labs import lab02

lab02.reference_signatures()  # forked ranks inherit it


def _stub(*args):
    raise NotImplementedError


def _verdict(capsys) -> str:
    return capsys.readouterr().out


# ---- the corpus: what the checks rely on


def test_the_corpus_plants_what_the_checks_need():
    c = lab02.corpus()
    assert 250 <= len(c) <= 350 and len(c.clusters) == 30 and sum(len(cl) - 1 for cl in c.clusters) == 40
    sigs = lab02.reference_signatures()
    for cl in c.clusters:  # planted copies: similar after normalisation, estimated well above the threshold
        for other in cl[1:]:
            assert lab02.exact_jaccard(c.texts[cl[0]], c.texts[other]) >= 0.6
    keys = [lab02.reference_band_hashes(s, lab02.BANDS, lab02.ROWS) for s in sigs]
    collide = [(x, p) for x, p in c.related if any(a == b for a, b in zip(keys[x], keys[p], strict=True))]
    assert len(collide) >= 3  # related documents that LSH makes candidates: only the verification keeps them
    assert all(lab02.estimated_jaccard(sigs[x], sigs[p]) < lab02.THRESHOLD - 0.05 for x, p in collide)
    assert lab02.reference_kept() == set(range(len(c))) - {m for cl in c.clusters for m in cl[1:]}
    assert lab02.corpus.cache_info().currsize == 1 and lab02.docs_of(1, 4)[1][:3] == [1, 5, 9]


# ---- exercise 1: shingles and MinHash


def test_ex1_reference_passes(capsys):
    assert lab02.check_minhash(lab02.reference_shingles, lab02.reference_minhash) is True
    assert "signatures equal it at all 128 positions" in _verdict(capsys)


def test_ex1_pythons_hash_fails_and_the_hint_says_why(capsys):
    def salted_minhash(shingle_set, num_perm, seed):
        a, b = lab02.hash_params(num_perm, seed)
        xs = [hash(s) & 0xFFFFFFFF for s in shingle_set]  # salted per process
        return [min((ai * x + bi) % lab02.PRIME for x in xs) for ai, bi in zip(a, b, strict=True)]

    assert lab02.check_minhash(lab02.reference_shingles, salted_minhash) is False
    out = _verdict(capsys)
    assert "signature differs from the reference's" in out and "salted per process" in out


@pytest.mark.parametrize("words", [
    lambda text: re.findall(r"\w+", text),  # forgets to lower-case: an upper-case copy shares nothing
    lambda text: text.lower().split(),  # punctuation stays glued to words: "be," != "be"
])
def test_ex1_shingles_without_normalisation_fail(capsys, words):
    def shingles(text, k):
        w = words(text)
        return {" ".join(w[i:i + k]) for i in range(len(w) - k + 1)} if len(w) >= k else {" ".join(w)} - {""}

    assert lab02.check_minhash(shingles, lab02.reference_minhash) is False
    assert "shingles('To be, or not to be" in _verdict(capsys) or "shingles('TO  BE" in _verdict(capsys)


def test_ex1_the_largest_value_instead_of_the_smallest_fails(capsys):
    def max_hash(shingle_set, num_perm, seed):
        a, b = lab02.hash_params(num_perm, seed)
        xs = [zlib.crc32(s.encode()) for s in shingle_set]
        return [max((ai * x + bi) % lab02.PRIME for x in xs) for ai, bi in zip(a, b, strict=True)]

    assert lab02.check_minhash(lab02.reference_shingles, max_hash) is False
    assert "the hash is right and the reduction is not" in _verdict(capsys)


def test_ex1_constants_instead_of_arguments_fail(capsys):
    def fixed_minhash(shingle_set, num_perm, seed):
        return lab02.reference_minhash(shingle_set, lab02.NUM_PERM, lab02.SEED)

    assert lab02.check_minhash(lab02.reference_shingles, fixed_minhash) is False
    assert "num_perm=16, seed=7" in _verdict(capsys)


def test_ex1_stub_is_not_answered(capsys):
    assert lab02.check_minhash(_stub, _stub) is False
    assert "not answered yet" in _verdict(capsys)


# ---- exercise 2: band keys


def test_ex2_reference_passes(capsys):
    assert lab02.check_bands(lab02.reference_band_hashes) is True
    out = _verdict(capsys)
    assert "keys equal exactly where the rows are" in out
    assert "a fresh Python process (another hash salt) gives the same keys" in out


def test_ex2_keys_without_the_band_index_fail(capsys):
    def no_index(signature, bands, rows):
        return [zlib.crc32(repr(tuple(signature[b * rows:(b + 1) * rows])).encode()) for b in range(bands)]

    assert lab02.check_bands(no_index) is False
    assert "Put the band index b into what you hash" in _verdict(capsys)


def test_ex2_pythons_hash_of_a_string_fails_in_a_fresh_process(capsys):
    def salted(signature, bands, rows):
        return [hash(repr((b, tuple(signature[b * rows:(b + 1) * rows])))) for b in range(bands)]

    assert lab02.check_bands(salted) is False
    assert "in a fresh Python process (another hash salt" in _verdict(capsys)


def test_ex2_strided_bands_fail(capsys):
    def strided(signature, bands, rows):  # band b = values b, b + bands, ...: not the rows the check compares
        return [int.from_bytes(hashlib.blake2b(repr((b, tuple(signature[b::bands]))).encode(), digest_size=8)
                               .digest(), "big") for b in range(bands)]

    assert lab02.check_bands(strided) is False
    assert re.search(r"documents \d+ and \d+ (have the same rows|get the same key)", _verdict(capsys))


def test_ex2_stub_is_not_answered(capsys):
    assert lab02.check_bands(_stub) is False
    assert "not answered yet" in _verdict(capsys)


# ---- exercise 3: the distributed dedup, on 1, 2 and 4 processes


def _dedup(gather=True, keep="smallest", verify=True, own_only=True):
    """The reference dedup with one of a learner's bugs switched on."""

    def dedup(texts, ids, rank, world_size):
        mine = []
        for doc_id in ids:
            sig = list(lab02.reference_signatures()[doc_id])  # computed once, before the fork
            mine.append((doc_id, sig, lab02.reference_band_hashes(sig, lab02.BANDS, lab02.ROWS)))
        everyone = [None] * world_size
        if gather:
            dist.all_gather_object(everyone, mine)
        else:
            everyone = [mine]  # only this rank's documents
        order = [doc_id for part in everyone for doc_id, _, _ in part]  # the order they arrived in
        signature = {doc_id: sig for part in everyone for doc_id, sig, _ in part}
        buckets = defaultdict(list)
        for part in everyone:
            for doc_id, _, keys in part:
                for b, key in enumerate(keys):
                    buckets[(b, key)].append(doc_id)
        first = {d: n for n, d in enumerate(order)}
        rank_of = (lambda d: d) if keep == "smallest" else (lambda d: first[d])  # "first seen" keeps another copy
        root = {d: d for d in order}

        def find(d):
            while root[d] != d:
                d = root[d]
            return d

        for members in buckets.values():
            for i, x in enumerate(members):
                for y in members[i + 1:]:
                    if not verify or lab02.estimated_jaccard(signature[x], signature[y]) >= lab02.THRESHOLD:
                        rx, ry = find(x), find(y)
                        winner, loser = sorted((rx, ry), key=rank_of)
                        root[loser] = winner
        return sorted(d for d in (ids if own_only else order) if find(d) == d)

    return dedup


@pytest.mark.distributed
def test_ex3_reference_passes(tmp_path, capsys):
    assert lab02.check_dedup(lab02.reference_dedup, tmp_path) is True
    out = _verdict(capsys)
    assert "4 process(es): kept 254 of" in out and "the same ids as 1 process" in out


@pytest.mark.distributed
def test_ex3_the_wrong_solutions_below_differ_from_a_right_one_only_in_their_bug(tmp_path):
    assert lab02.check_dedup(_dedup(), tmp_path) is True


@pytest.mark.distributed
def test_ex3_without_the_all_gather_duplicates_across_ranks_survive(tmp_path, capsys):
    assert lab02.check_dedup(_dedup(gather=False), tmp_path) is False
    out = _verdict(capsys)
    assert "your 1-process run is right, but on 2 processes" in out
    assert "copies kept" in out and "on rank 1" in out and "dist.all_gather_object" in out


@pytest.mark.distributed
def test_ex3_first_seen_keeps_a_copy_that_depends_on_the_world_size(tmp_path, capsys):
    assert lab02.check_dedup(_dedup(keep="first seen"), tmp_path) is False
    out = _verdict(capsys)
    assert "your 1-process run is right, but on 2 processes" in out
    assert "expected the smallest id" in out and "whatever the rank" in out


@pytest.mark.distributed
def test_ex3_candidates_are_not_duplicates(tmp_path, capsys):
    assert lab02.check_dedup(_dedup(verify=False), tmp_path) is False
    out = _verdict(capsys)
    assert "on 1 process(es)" in out and "it is not a near-duplicate of anything" in out
    assert f"below THRESHOLD {lab02.THRESHOLD}" in out


@pytest.mark.distributed
def test_ex3_every_rank_returning_every_kept_id_fails(tmp_path, capsys):
    assert lab02.check_dedup(_dedup(own_only=False), tmp_path) is False
    assert "rank 0 returned ids that are not its own" in _verdict(capsys)


@pytest.mark.distributed
def test_ex3_stub_is_not_answered(tmp_path, capsys):
    def dedup(texts, ids, rank, world_size):
        raise NotImplementedError

    assert lab02.check_dedup(dedup, tmp_path) is False
    assert "not answered yet" in _verdict(capsys)
