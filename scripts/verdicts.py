"""The benchmarks' verdicts on a target: the distribution-free interval of the median of
per-round ratios, and whether the target holds, does not hold, or is inside the noise.
Imported by scripts/bench-stm and scripts/bench-tracer."""
import math, statistics


def median_interval(xs, confidence=0.9):
    """A distribution-free confidence interval for the median of xs: the k-th smallest and
    k-th largest, with k the largest for which the binomial(n, 1/2) puts at least
    `confidence` between them (7 rounds: min-max, 98 %; 9: 2nd-8th, 96 %)."""
    xs = sorted(xs)
    n = len(xs)
    def cover(k):  # P(k <= Binomial(n, 1/2) <= n - k)
        return sum(math.comb(n, i) for i in range(k, n - k + 1)) / 2 ** n
    k = 0
    while k + 1 <= n // 2 and cover(k + 1) >= confidence:
        k += 1
    k = max(k, 1) if n > 1 else 1
    return xs[k - 1], xs[n - k]


def verdict(xs, target, higher_is_better):
    """Whether the median of the per-round ratios xs meets the target, by its 90 % interval:
    "holds", "does not hold", or "inside the noise" (the interval straddles the target)."""
    lo, hi = median_interval(xs)
    med = statistics.median(xs)
    good, bad = (lo >= target, hi < target) if higher_is_better else (hi <= target, lo > target)
    word = "holds" if good else "does not hold" if bad else "inside the noise"
    return f"{word:<16} median {med:.3f}, 90 % interval {lo:.3f}-{hi:.3f}"
