"use strict";

// A small seeded pseudo-random generator (mulberry32), so that fault profiles and generated
// cases repeat exactly from one run to the next.
function mulberry32(seed)
{
    let a = seed >>> 0;
    return () =>
    {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

module.exports = { mulberry32 };
