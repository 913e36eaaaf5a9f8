"""DPss: the two-part private release of compositional data (seed 002, Algorithm 1).

Guo, Barrientos & Pena release, for compositional records ``x_i`` on the simplex (extract §2.3,
§2.4):

1. ``S_G = Score(D) + eG``: the :class:`~privpost.queries.threshold_score.ThresholdScore` histogram of the
   per-record minimum part over candidate thresholds ``a_1 > ... > a_M``, with two-sided
   geometric noise ``eG_m ~ TwoSidedGeometric(exp(-eps_2 / 2))`` -- privpost's
   :class:`~privpost.mechanisms.DiscreteLaplace` calibrated to the score's replace-one L1
   sensitivity 2 (scale ``t = 2 / eps_2``: pmf ∝ exp(-|z| / t) = r^|z| with r = exp(-eps_2 / 2)),
   drawn by the exact integer sampler. ``eps_2``-DP.
2. ``a = A(S_G)``: a threshold rule (post-processing, no privacy cost); see
   :func:`select_threshold` and :data:`RULES`.
3. ``S_L = S_0(D, a) + eL``: the :class:`~privpost.queries.CensoredLogMean` of the records
   censored at ``a`` with Laplace noise of scale ``-D log(a) / (n eps_1)``; ``eps_1``-DP.
   With a data split (``n1 > 0``) the records are split uniformly at random into ``D1`` (``n1``)
   and ``D2`` (``n2 = n - n1``) and each part gets its own release with scale
   ``-D log(a) / (n_l eps_1)`` -- **n_l, not n** (the seed's box prints ``n``, which under-noises
   by ``n / n_l`` and breaks the guarantee; extract §2.4 warning). The two parts are disjoint,
   so together they are ``eps_1``-DP (parallel composition).

Total: ``eps_1 + eps_2`` (sequential composition, Theorem 1), under replace-one neighbours with
public ``n`` (and ``n1``, ``n2``). The release is one :class:`privpost.ReleaseSet` whose
``subsets`` (``"all"``, ``"D1"``, ``"D2"``) make the set's :meth:`total_privacy` apply the
parallel composition; :func:`parse_dpss` checks a set is a consistent DPss release (roles,
shared threshold grid, the threshold equal to the rule applied to the released score).
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass

import numpy as np

from privpost.errors import PrivpostError, ReleaseError

__all__ = ["DEFAULT_THRESHOLDS", "RULES", "DEFAULT_RULE", "geometric_margin", "select_threshold",
           "dpss_release", "DPss", "parse_dpss"]

#: the seed's candidate grid (Sec. 4.1)
DEFAULT_THRESHOLDS = (0.1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)

#: threshold rules (extract §2.3 item 4):
#:
#: ``"prose"`` (default): the paper's text -- ``a_1`` if the 95% interval of ``s_1`` lies above
#:   ``0.99 n`` (``s_G1 - k >= 0.99 n``); otherwise the **smallest** ``a_m`` (largest ``m >= 2``)
#:   whose interval lies above ``0.01 n`` (``s_Gm - k >= 0.01 n``); if none, ``a_1``.
#: ``"prose-upper"``: as ``"prose"`` but with the upper interval end ``s_G + k`` in both tests
#:   (the printed formula's inequality with the text's "smallest" and fallback).
#: ``"printed"``: the formula as printed -- ``a_1`` if ``s_G1 + k >= 0.99 n``; else
#:   ``max{a_m : s_Gm + k >= 0.01 n, m >= 2}`` (the largest qualifying, i.e. smallest ``m``);
#:   if none, ``a_M``.
RULES = ("prose", "prose-upper", "printed")
DEFAULT_RULE = "prose"


def _check_eps(value, name: str) -> float:
    if isinstance(value, bool):
        raise PrivpostError(f"{name} must be a positive number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise PrivpostError(f"{name} must be a positive number, e.g. {name}=0.5; got {value!r}") from None
    if not (v > 0 and math.isfinite(v)):
        raise PrivpostError(f"{name} must be a positive finite number, e.g. {name}=0.5; got {value!r}")
    return v


def geometric_margin(scale: float, level: float = 0.025) -> int:
    """``k = -eG_{0.025}``: the smallest integer ``k >= 1`` with ``P(eG <= -k) <= level``.

    ``scale`` is the discrete Laplace scale ``t`` of the score's noise (pmf ∝ exp(-|z|/t));
    with ``r = exp(-1/t)`` (the seed's geometric parameter, ``exp(-eps_2/2)``),
    ``P(eG <= -k) = r^k / (1 + r)`` for ``k >= 1`` (sum of the geometric tail times the
    normaliser ``(1 - r)/(1 + r)``), so ``k = ceil(log(level (1 + r)) / log r)``. By symmetry
    ``eG_{0.975} = +k`` (extract §2.3 item 3). ``r`` underflowing to 0 (eps_2 = 1e10) gives
    ``k = 1``. Checked against the extract's values 33 / 17 / 6 / 1 at eps = 0.25 / 0.5 / 1.5 /
    1e10 with eps_2 = 0.75 eps.
    """
    r = math.exp(-1.0 / float(scale))
    if r <= 0.0:
        return 1
    k = max(1, math.ceil(math.log(level * (1.0 + r)) / math.log(r)))
    # guard the float ceiling at the boundary: step to the exact smallest k
    while k > 1 and r ** (k - 1) / (1 + r) <= level:
        k -= 1
    while r ** k / (1 + r) > level:
        k += 1
    return k


def select_threshold(score, n: int, thresholds, k: int, rule: str = DEFAULT_RULE) -> float:
    """The censoring threshold ``a = A(S_G)`` (post-processing of the released score).

    Parameters
    ----------
    score : (M,) numbers -- the released noisy score ``S_G``.
    n : int -- public number of records the score was computed from.
    thresholds : (M,) strictly decreasing candidates ``a_1 > ... > a_M``.
    k : int -- the margin :func:`geometric_margin`.
    rule : one of :data:`RULES`.
    """
    if rule not in RULES:
        raise PrivpostError(f"rule must be one of {list(RULES)}, got {rule!r}")
    s = [float(v) for v in score]
    ths = [float(a) for a in thresholds]
    if len(s) != len(ths):
        raise PrivpostError(f"score has {len(s)} bins but there are {len(ths)} thresholds")
    hi, lo = 0.99 * n, 0.01 * n
    if rule == "printed":
        if s[0] + k >= hi:
            return ths[0]
        ok = [a for a, v in zip(ths[1:], s[1:]) if v + k >= lo]
        return max(ok) if ok else ths[-1]
    sign = -1 if rule == "prose" else +1
    if s[0] + sign * k >= hi:
        return ths[0]
    ok = [a for a, v in zip(ths[1:], s[1:]) if v + sign * k >= lo]
    return min(ok) if ok else ths[0]


def _seeds(seed, k: int):
    """``k`` seeds for the parts of the release: ``None`` each (CSPRNG) or children of ``seed``."""
    if seed is None:
        return [None] * k
    from privpost._rng import spawn

    return spawn(seed, k)


def dpss_release(records, epsilon1: float, epsilon2: float, *, thresholds=DEFAULT_THRESHOLDS,
                 split: float | int | None = None, rule: str = DEFAULT_RULE, columns=None,
                 seed=None, description: str = ""):
    """Algorithm 1 of seed 002 on the curator's side: the DPss release set.

    Parameters
    ----------
    records : (n, D) array of compositions (rows on the simplex, D >= 2).
    epsilon1 : float > 0 -- budget of the censored mean-log statistic(s) (Laplace).
    epsilon2 : float > 0 -- budget of the score (two-sided geometric).
    thresholds : strictly decreasing candidates in (0, 1); default the seed's six.
    split : None (no split), a fraction in (0, 1) or an integer ``n1`` in ``1..n-1``.
        With a split the records are permuted uniformly at random; the first ``n1`` form
        ``D1`` (for the prior of p2-p5), the rest ``D2`` (``n2 = n - n1``).
    rule : threshold rule, one of :data:`RULES` (default ``"prose"``).
    columns : optional names of the D parts.
    seed : None (CSPRNG; use for real releases) or int/Generator (reproducible, testing only).

    Returns
    -------
    privpost.ReleaseSet
        ``releases[0]``: the score on all records (``subsets[0] = "all"``); then either one
        ``CensoredLogMean`` on all records or two, on ``D1`` and ``D2``. Every release's
        ``metadata["dpss"]`` records its role; ``total_privacy()`` is ``eps_1 + eps_2``.
    """
    from privpost.mechanisms import DiscreteLaplace, Laplace
    from privpost.queries import CensoredLogMean
    from privpost.queries.threshold_score import ThresholdScore
    from privpost.releases.release import ReleaseSet, release

    e1 = _check_eps(epsilon1, "epsilon1")
    e2 = _check_eps(epsilon2, "epsilon2")
    if rule not in RULES:
        raise PrivpostError(f"rule must be one of {list(RULES)}, got {rule!r}")
    x = np.asarray(records)
    if x.ndim != 2 or x.shape[1] < 2:
        from privpost.errors import DataError
        raise DataError(f"records: expected compositions of shape (n, D) with D >= 2, got {x.shape}")
    n, D = x.shape
    score_q = ThresholdScore(D, thresholds, columns=columns)
    x = score_q.validate_records(x)
    n1 = _split_size(split, n)
    s_score, s_split, s1, s2 = _seeds(seed, 4)
    meta = {"rule": rule, "thresholds": list(score_q.thresholds), "epsilon1": e1, "epsilon2": e2,
            "n": n, "n1": n1, "n2": n - n1}
    score_rel = release(x, score_q, DiscreteLaplace(epsilon=e2), seed=s_score,
                        metadata={"dpss": {**meta, "role": "score", "subset": "all"}})
    k = geometric_margin(score_rel.mechanism.scale)
    a = select_threshold(score_rel.observed, n, score_q.thresholds, k, rule)
    meta.update(threshold=a, margin_k=k)
    rels, subsets = [score_rel], ["all"]
    if n1 == 0:
        parts = [("all", x, s1)]
    else:
        gen = (np.random.default_rng(secrets.randbits(128)) if s_split is None else s_split)
        perm = gen.permutation(n)
        parts = [("D1", x[perm[:n1]], s1), ("D2", x[perm[n1:]], s2)]
    for name, xs, sd in parts:
        q = CensoredLogMean(D, a, xs.shape[0], columns=score_q.columns)
        rels.append(release(xs, q, Laplace(epsilon=e1), seed=sd,
                            metadata={"dpss": {**meta, "role": "statistic", "subset": name}}))
        subsets.append(name)
    desc = description or (f"DPss release (seed 002 Algorithm 1): eps1={e1:g}, eps2={e2:g}, "
                           f"rule={rule}, a={a:g}" + (f", split n1={n1}, n2={n - n1}" if n1 else ""))
    return ReleaseSet(rels, description=desc, subsets=subsets)


def _split_size(split, n: int) -> int:
    if split is None or split == 0:
        return 0
    if isinstance(split, bool):
        raise PrivpostError(f"split must be a fraction in (0, 1) or a count n1, got {split!r}")
    if isinstance(split, (int, np.integer)):
        n1 = int(split)
    else:
        try:
            f = float(split)
        except (TypeError, ValueError):
            raise PrivpostError(f"split must be a fraction in (0, 1) or a count n1, got {split!r}") from None
        if not 0.0 < f < 1.0:
            raise PrivpostError(f"split must be a fraction in (0, 1) (e.g. 0.25) or a count n1, got {split!r}")
        n1 = int(round(f * n))
    if not 1 <= n1 <= n - 1:
        raise PrivpostError(f"split gives n1 = {n1} records for D1 out of n = {n}; both parts "
                            "need at least one record")
    return n1


@dataclass(frozen=True)
class DPss:
    """A parsed, validated DPss release set (see :func:`parse_dpss`).

    ``score``: the score Release; ``stat``: the CensoredLogMean on all records (or None);
    ``stat1``, ``stat2``: on D1 and D2 (or None); ``threshold`` a; ``margin_k``; ``rule``;
    ``thresholds``; ``n``, ``n1``, ``n2`` (``n1 = 0`` without a split); ``parts`` D;
    ``epsilon1``, ``epsilon2``.
    """

    release_set: object
    score: object
    stat: object
    stat1: object
    stat2: object
    threshold: float
    margin_k: int
    rule: str
    thresholds: tuple
    n: int
    n1: int
    n2: int
    parts: int
    epsilon1: float
    epsilon2: float

    @property
    def split(self) -> bool:
        return self.stat1 is not None

    def laplace_scale(self, which: str = "stat") -> float:
        """Laplace scale of a statistic release: ``-D log(a) / (n_l eps_1)``."""
        return float(getattr(self, which).mechanism.scale)


def parse_dpss(release_set) -> DPss:
    """Check that ``release_set`` is a DPss release and return its parts.

    Raises :class:`ReleaseError` naming the field when: a release has no ``metadata.dpss.role``;
    there is not exactly one score release on ``"all"``; the statistics are neither one release
    on ``"all"`` nor one on ``"D1"`` and one on ``"D2"``; their query is not CensoredLogMean with
    the score's number of parts; their thresholds differ; the threshold is not the one the stated
    rule selects from the released score; or the statistics' budgets differ.
    """
    from privpost.releases.release import Release, ReleaseSet

    if isinstance(release_set, Release):
        raise ReleaseError("release", "a DPss analysis needs the whole DPss release set (score "
                           "and statistic), made by `privpost dpss` or privpost.releases.dpss."
                           "dpss_release; got a single release")
    if not isinstance(release_set, ReleaseSet):
        raise ReleaseError("release", f"expected a ReleaseSet, got {type(release_set).__name__}")
    subsets = release_set.subsets or ["all"] * len(release_set.releases)
    score, stats = None, {}
    for i, (sub, rel) in enumerate(zip(subsets, release_set.releases)):
        info = rel.metadata.get("dpss") if isinstance(rel.metadata, dict) else None
        role = info.get("role") if isinstance(info, dict) else None
        if role == "score":
            if rel.query.name != "threshold_score" or sub != "all" or score is not None:
                raise ReleaseError(f"releases[{i}]", "a DPss set has exactly one score release "
                                   "(a threshold_score query on all records)")
            score = (rel, info)
        elif role == "statistic":
            if rel.query.name != "censored_log_mean":
                raise ReleaseError(f"releases[{i}].query", "a DPss statistic must be a "
                                   "censored_log_mean query")
            if sub in stats:
                raise ReleaseError(f"subsets[{i}]", f"two statistics on subset {sub!r}")
            if rel.mechanism.name != "laplace":
                raise ReleaseError(f"releases[{i}].mechanism", "a DPss statistic uses the "
                                   "Laplace mechanism")
            stats[sub] = rel
        else:
            raise ReleaseError(f"releases[{i}].metadata.dpss.role", "missing: this is not a DPss "
                               "release set (make one with `privpost dpss`)")
    if score is None:
        raise ReleaseError("releases", "no score release (metadata.dpss.role = 'score')")
    if set(stats) not in ({"all"}, {"D1", "D2"}):
        raise ReleaseError("subsets", f"statistics on {sorted(stats)}; a DPss set has one on "
                           "'all' (no split) or one on 'D1' and one on 'D2'")
    srel, info = score
    if srel.mechanism.name != "discrete_laplace":
        raise ReleaseError("releases[0].mechanism", "the DPss score uses the discrete Laplace "
                           "(two-sided geometric) mechanism")
    rule = info.get("rule", DEFAULT_RULE)
    if rule not in RULES:
        raise ReleaseError("releases[0].metadata.dpss.rule", f"must be one of {list(RULES)}")
    ths = srel.query.thresholds
    k = geometric_margin(srel.mechanism.scale)
    a = select_threshold(srel.observed, srel.n, ths, k, rule)
    for sub, rel in stats.items():
        if rel.query.parts != srel.query.parts:
            raise ReleaseError(f"statistic on {sub}.query.parts", "differs from the score's")
        if rel.query.threshold != a:
            raise ReleaseError(f"statistic on {sub}.query.threshold",
                               f"{rel.query.threshold:g} is not the threshold the rule {rule!r} "
                               f"selects from the released score ({a:g})")
    eps1 = {float(r.mechanism.epsilon) for r in stats.values()}
    if len(eps1) != 1:
        raise ReleaseError("releases", "the DPss statistics on D1 and D2 must share epsilon1")
    n = srel.n
    if "all" in stats:
        st, s1, s2, n1 = stats["all"], None, None, 0
        if st.n != n:
            raise ReleaseError("releases[1].n", f"{st.n} differs from the score's n = {n}")
    else:
        st, s1, s2 = None, stats["D1"], stats["D2"]
        n1 = s1.n
        if s1.n + s2.n != n:
            raise ReleaseError("subsets", f"n1 + n2 = {s1.n + s2.n} differs from n = {n}: D1 and "
                               "D2 must partition the records")
    return DPss(release_set=release_set, score=srel, stat=st, stat1=s1, stat2=s2, threshold=a,
                margin_k=k, rule=rule, thresholds=tuple(ths), n=n, n1=n1, n2=n - n1,
                parts=srel.query.parts, epsilon1=eps1.pop(),
                epsilon2=float(srel.mechanism.epsilon))
