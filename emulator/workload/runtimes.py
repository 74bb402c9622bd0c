"""Run-time distributions: a Weibull, as England and Weissman fit (§III), or a mixture
of Weibulls (a hyper-Weibull) where one Weibull cannot follow a trace's quantiles.

A mixture is fitted by least squares on the log quantiles from 0.5% to 99.5% (scipy), so it
follows the trace's shape across its range rather than only its bulk; one Weibull is fitted
by maximum likelihood, as the seed did. Run times of 0 seconds are kept as a point
mass beside the continuous part.
"""

from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

FIT_PROBABILITIES = np.linspace(0.005, 0.995, 199)


@dataclass
class RunTimes:
    """A distribution of run times in seconds: ``zero_fraction`` of 0 s, else a Weibull mixture."""

    weights: list
    shapes: list
    scales: list
    zero_fraction: float = 0.0

    def to_json(self):
        return {"weights": list(map(float, self.weights)), "shapes": list(map(float, self.shapes)),
                "scales": list(map(float, self.scales)), "zero_fraction": float(self.zero_fraction)}

    def cdf(self, seconds):
        x = np.asarray(seconds, dtype=float)
        cont = sum(w * stats.weibull_min.cdf(x, c, scale=s)
                   for w, c, s in zip(self.weights, self.shapes, self.scales))
        return np.where(x < 0, 0.0, self.zero_fraction + (1 - self.zero_fraction) * cont)

    def quantile(self, probabilities):
        """Run time at each probability (the inverse of :meth:`cdf`)."""
        p = np.atleast_1d(np.asarray(probabilities, dtype=float))
        q = np.clip((p - self.zero_fraction) / (1 - self.zero_fraction), 0.0, 1.0)
        out = _mixture_quantile(q, self.weights, self.shapes, self.scales)
        out = np.where(p <= self.zero_fraction, 0.0, out)
        return out if np.ndim(probabilities) else float(out[0])

    def mean(self):
        cont = sum(w * s * special.gamma(1 + 1 / c)
                   for w, c, s in zip(self.weights, self.shapes, self.scales))
        return (1 - self.zero_fraction) * cont


def _mixture_quantile(q, weights, shapes, scales, iterations=64):
    """Quantiles of a Weibull mixture by bisection on log time (vectorised over ``q``)."""
    weights, shapes, scales = (np.asarray(v, dtype=float) for v in (weights, shapes, scales))
    q = np.clip(q, 1e-12, 1 - 1e-12)
    # bracket: the component quantiles bound the mixture's
    with np.errstate(all="ignore"):
        comp = scales[None, :] * (-np.log1p(-q[:, None])) ** (1 / shapes[None, :])
        lo = np.log(np.maximum(comp.min(axis=1), 1e-300))
        hi = np.log(np.minimum(comp.max(axis=1), 1e300))
        for _ in range(iterations):
            mid = (lo + hi) / 2
            x = np.exp(mid)[:, None]
            cdf = (weights[None, :] * -np.expm1(-(x / scales[None, :]) ** shapes[None, :])).sum(1)
            below = cdf < q
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return np.exp((lo + hi) / 2)


def _unpack(theta, k):
    weights = special.softmax(np.r_[0.0, theta[:k - 1]])
    return weights, np.exp(theta[k - 1:2 * k - 1]), np.exp(theta[2 * k - 1:])


def fit_runtimes(seconds, *, components=4):
    """Fit a run-time distribution to observed run times (seconds, >= 0).

    ``components=1`` is England and Weissman's single Weibull, fitted by maximum likelihood. More
    components fit a mixture by least squares on the log quantiles (0.5% to 99.5%), started
    from three shapes, the best kept.

    Parameters
    ----------
    seconds : array_like
        Observed run times; zeros form the point mass at 0.
    components : int
        Weibulls in the mixture.

    Raises
    ------
    ValueError
        Fewer than ten positive run times, or ``components`` < 1.
    """
    x = np.asarray(seconds, dtype=float)
    if components < 1:
        raise ValueError(f"components must be >= 1, got {components}")
    positive = x[x > 0]
    if len(positive) < 10:
        raise ValueError(f"need at least 10 positive run times to fit, got {len(positive)}")
    zero_fraction = float((x <= 0).mean())
    k = components
    if k == 1:
        shape, _, scale = stats.weibull_min.fit(positive, floc=0)
        return RunTimes([1.0], [float(shape)], [float(scale)], zero_fraction)
    target = np.log(np.percentile(positive, FIT_PROBABILITIES * 100))

    def residuals(th):
        w, c, s = _unpack(th, k)
        return np.log(_mixture_quantile(FIT_PROBABILITIES, w, c, s, 40)) - target

    spread = np.log(np.percentile(positive, np.linspace(50 / k, 100 - 50 / k, k)))
    best = None
    with np.errstate(all="ignore"):
        for shape in (0.7, 1.0, 1.5):
            start = np.r_[np.zeros(k - 1), np.full(k, np.log(shape)), spread]
            fit = optimize.least_squares(residuals, start, method="trf", x_scale="jac",
                                         max_nfev=400)
            if best is None or fit.cost < best.cost:
                best = fit
    w, c, s = _unpack(best.x, k)
    return RunTimes(list(w), list(c), list(s), zero_fraction)


def runtimes_from_json(data):
    return RunTimes(data["weights"], data["shapes"], data["scales"], data.get("zero_fraction", 0.0))
