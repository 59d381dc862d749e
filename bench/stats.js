"use strict";

// Small statistics helpers shared by the benchmark processes.

/** Nearest-rank percentile of an unsorted array (p in [0, 100]); null when empty. */
function percentile(values, p)
{
    if (!values.length)
    {
        return null;
    }
    const sorted = Float64Array.from(values).sort();
    const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
    return sorted[rank];
}

function summary(values)
{
    if (!values.length)
    {
        return { n: 0, p50: null, p90: null, p99: null, max: null, mean: null };
    }
    const sorted = Float64Array.from(values).sort();
    const at = p => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
    let sum = 0;
    for (const v of sorted)
    {
        sum += v;
    }
    return { n: sorted.length, p50: at(50), p90: at(90), p99: at(99), max: sorted[sorted.length - 1], mean: sum / sorted.length };
}

/** Jain's fairness index: (sum x)^2 / (n * sum x^2); 1 is perfectly fair, 1/n is one-takes-all. */
function jain(xs)
{
    const n = xs.length;
    const s = xs.reduce((a, b) => a + b, 0);
    const s2 = xs.reduce((a, b) => a + b * b, 0);
    return n === 0 || s2 === 0 ? null : (s * s) / (n * s2);
}

/** Evenness of per-bucket counts: max/mean and the coefficient of variation. */
function spread(buckets)
{
    if (!buckets.length)
    {
        return { buckets: 0, mean: null, max: null, min: null, maxOverMean: null, cv: null };
    }
    const n = buckets.length;
    const mean = buckets.reduce((a, b) => a + b, 0) / n;
    const max = Math.max(...buckets);
    const min = Math.min(...buckets);
    const variance = buckets.reduce((a, b) => a + (b - mean) * (b - mean), 0) / n;
    return { buckets: n, mean, max, min, maxOverMean: mean > 0 ? max / mean : null, cv: mean > 0 ? Math.sqrt(variance) / mean : null };
}

module.exports = { percentile, summary, jain, spread };
