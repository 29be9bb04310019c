//! Valid rank-2 partitions that defeat grids and bucket lists, shared by the worst-case
//! locate tests and the hostile-input memory catalogue: `(origin, shape)` per region and
//! the enclosing extent.

#![allow(dead_code)]

/// Regions as (origin, shape).
pub type Boxes = Vec<([u64; 2], [u64; 2])>;

/// Concentric rings of four thin arms around one centre cell: no cut is clean at any scale.
pub fn pinwheel_rings(rings: u64) -> (Boxes, [u64; 2]) {
    let mut v = vec![([rings, rings], [1, 1])];
    for k in 1..=rings {
        let lo = rings - k;
        let len = 2 * k;
        v.push(([lo, lo], [len, 1]));
        v.push(([lo + len, lo], [1, len]));
        v.push(([lo + 1, lo + len], [len, 1]));
        v.push(([lo, lo + 1], [1, len]));
    }
    let side = 2 * rings + 1;
    (v, [side, side])
}

/// A staircase: per step a vertical bar from the diagonal up and a horizontal bar right of
/// it.
pub fn staircase(steps: u64) -> (Boxes, [u64; 2]) {
    let mut v = Vec::new();
    for i in 0..steps {
        v.push(([i, i], [1, steps - i]));
        if i + 1 < steps {
            v.push(([i + 1, i], [steps - i - 1, 1]));
        }
    }
    (v, [steps, steps])
}

/// Rows of height 1, each cut into two long bricks at a different place.
pub fn bricks(rows: u64, width: u64) -> (Boxes, [u64; 2]) {
    let mut v = Vec::new();
    for y in 0..rows {
        let cut = 1 + (y * 7919 + 13) % (width - 1);
        v.push(([0, y], [cut, 1]));
        v.push(([cut, y], [width - cut, 1]));
    }
    (v, [width, rows])
}

/// A `k` × `k` cluster of unit cells in a corner of a huge extent, beside two huge boxes.
pub fn cluster(k: u64, huge: u64) -> (Boxes, [u64; 2]) {
    let mut v = vec![([k, 0], [huge - k, huge]), ([0, k], [k, huge - k])];
    for x in 0..k {
        for y in 0..k {
            v.push(([x, y], [1, 1]));
        }
    }
    (v, [huge, huge])
}

/// A spiral of recursive cuts: each step cuts a strip one unit wide off alternating sides
/// of what remains, so the cuts nest `n` deep.
pub fn spiral(n: u64) -> (Boxes, [u64; 2]) {
    let side = n / 2 + 2;
    let (mut x0, mut y0, mut x1, mut y1) = (0u64, 0u64, side, side);
    let mut v = Vec::new();
    let mut k = 0;
    while x1 - x0 > 1 && y1 - y0 > 1 {
        match k % 4 {
            0 => {
                v.push(([x0, y0], [x1 - x0, 1]));
                y0 += 1;
            }
            1 => {
                v.push(([x1 - 1, y0], [1, y1 - y0]));
                x1 -= 1;
            }
            2 => {
                v.push(([x0, y1 - 1], [x1 - x0, 1]));
                y1 -= 1;
            }
            _ => {
                v.push(([x0, y0], [1, y1 - y0]));
                x0 += 1;
            }
        }
        k += 1;
    }
    v.push(([x0, y0], [x1 - x0, y1 - y0]));
    (v, [side, side])
}

/// Xorshift step for reproducible samples.
pub fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// Per region: global origin, then shape.
pub fn coords(boxes: &Boxes) -> Vec<u64> {
    boxes
        .iter()
        .flat_map(|(o, s)| [o[0], o[1], s[0], s[1]])
        .collect()
}

/// Recursive random guillotine splits of a 2^20 square into `n` boxes (the irregular
/// partition the bucket lists answer).
pub fn random_splits(n: usize, seed: u64) -> (Boxes, [u64; 2]) {
    let side = 1u64 << 20;
    let mut s = seed | 1;
    let mut v: Boxes = vec![([0, 0], [side, side])];
    let mut i = 0;
    while v.len() < n {
        let at = i % v.len();
        let a = (next(&mut s) % 2) as usize;
        i += if cut_box(&mut v, at, a, &mut s) { 7 } else { 1 };
    }
    (v, [side, side])
}

/// Cut box `v[at]` across axis `a` at a random point drawn from `s`: the low part stays at
/// `at`, the high part is pushed. A box one element thick on `a` is left as it is (and no
/// number is drawn); returns whether it was cut.
pub fn cut_box<const R: usize>(
    v: &mut Vec<([u64; R], [u64; R])>,
    at: usize,
    a: usize,
    s: &mut u64,
) -> bool {
    let (o, sh) = v[at];
    if sh[a] < 2 {
        return false;
    }
    let cut = 1 + next(s) % (sh[a] - 1);
    let (mut o2, mut s1, mut s2) = (o, sh, sh);
    s1[a] = cut;
    s2[a] = sh[a] - cut;
    o2[a] += cut;
    v[at] = (o, s1);
    v.push((o2, s2));
    true
}

/// A spiral whose strips are cut into cells so that each strip holds a sixteenth of the
/// regions still to come: the only clean cuts leave 1/16 of a set on one side, which drove
/// the old k-d tree build's recursion about log(n) / log(16/15) deep.
pub fn thick_spiral(n: u64) -> (Boxes, [u64; 2]) {
    let side = 1u64 << 31;
    let (mut x0, mut y0, mut x1, mut y1) = (0u64, 0u64, side, side);
    let mut v = Vec::new();
    let mut left = n;
    let mut k = 0;
    while left > 16 {
        let cells = left.div_ceil(16);
        left -= cells;
        // The strip: (origin, extent) with the long axis `long`.
        let (o, e, long) = match k % 4 {
            0 => ([x0, y0], [x1 - x0, 1], 0),
            1 => ([x1 - 1, y0], [1, y1 - y0], 1),
            2 => ([x0, y1 - 1], [x1 - x0, 1], 0),
            _ => ([x0, y0], [1, y1 - y0], 1),
        };
        match k % 4 {
            0 => y0 += 1,
            1 => x1 -= 1,
            2 => y1 -= 1,
            _ => x0 += 1,
        }
        let len = e[long] / cells;
        for c in 0..cells {
            let mut co = o;
            let mut ce = e;
            co[long] += c * len;
            ce[long] = if c + 1 == cells {
                e[long] - c * len
            } else {
                len
            };
            v.push((co, ce));
        }
        k += 1;
    }
    v.push(([x0, y0], [x1 - x0, y1 - y0]));
    (v, [side, side])
}

/// Rank-3 regions as (origin, shape).
pub type Boxes3 = Vec<([u64; 3], [u64; 3])>;

/// Per rank-3 region: global origin, then shape.
pub fn coords3(boxes: &Boxes3) -> Vec<u64> {
    boxes
        .iter()
        .flat_map(|(o, s)| o.iter().chain(s).copied())
        .collect()
}

/// Rotate the axes of a box (origin, shape) by `k` places: axis `a` goes to `(a + k) % 3`.
fn rotate3((o, s): ([u64; 3], [u64; 3]), k: usize) -> ([u64; 3], [u64; 3]) {
    let (mut ro, mut rs) = ([0; 3], [0; 3]);
    for a in 0..3 {
        ro[(a + k) % 3] = o[a];
        rs[(a + k) % 3] = s[a];
    }
    (ro, rs)
}

/// Nested cubic shells around one centre cube, six regions a shell: a floor and a ceiling
/// plate and four walls in a pinwheel (rank 2's `pinwheel_rings` extruded between them),
/// the shells turned one axis further each time, so that every plane of every axis
/// crosses the walls or plates of all shells beyond it. `6 · shells + 1` regions.
pub fn pinwheel3(shells: u64) -> (Boxes3, [u64; 3]) {
    let r = shells;
    let mut v = vec![([r, r, r], [1, 1, 1])];
    for k in 1..=r {
        let (lo, len) = (r - k, 2 * k);
        let side = len + 1;
        let turn = (k % 3) as usize;
        let mut shell = vec![
            ([lo, lo, lo], [side, side, 1]),
            ([lo, lo, lo + len], [side, side, 1]),
        ];
        let (z, h) = (lo + 1, len - 1);
        shell.push(([lo, lo, z], [len, 1, h]));
        shell.push(([lo + len, lo, z], [1, len, h]));
        shell.push(([lo + 1, lo + len, z], [len, 1, h]));
        shell.push(([lo, lo + 1, z], [1, len, h]));
        v.extend(shell.into_iter().map(|b| rotate3(b, turn)));
    }
    let side = 2 * r + 1;
    (v, [side; 3])
}

/// `layers` layers one element thick of `m` slabs each, alternately long in axis 0
/// (stacked along axis 1) and long in axis 1 (stacked along axis 0): every slab touches
/// every slab of the layers above and below it (`m²` side-by-side pairs a layer).
pub fn crossed_slabs(m: u64, layers: u64) -> (Boxes3, [u64; 3]) {
    let mut v = Vec::new();
    for l in 0..layers {
        for j in 0..m {
            v.push(if l % 2 == 0 {
                ([0, j, l], [m, 1, 1])
            } else {
                ([j, 0, l], [1, m, 1])
            });
        }
    }
    (v, [m, m, layers])
}

/// A staircase of `steps` corners along the diagonal: at step `i`, the points whose
/// smallest coordinate is `i`, in three plates (`x = i`; `y = i, x > i`; `z = i, x, y >
/// i`). `3 · steps − 2` regions.
pub fn staircase3(steps: u64) -> (Boxes3, [u64; 3]) {
    let s = steps;
    let mut v = Vec::new();
    for i in 0..s {
        v.push(([i, i, i], [1, s - i, s - i]));
        if i + 1 < s {
            v.push(([i + 1, i, i], [s - i - 1, 1, s - i]));
            v.push(([i + 1, i + 1, i], [s - i - 1, s - i - 1, 1]));
        }
    }
    (v, [s; 3])
}

/// A `k`³ cluster of unit cubes in a corner of a huge cube, beside three huge boxes.
pub fn cluster3(k: u64, huge: u64) -> (Boxes3, [u64; 3]) {
    let mut v = vec![
        ([k, 0, 0], [huge - k, huge, huge]),
        ([0, k, 0], [k, huge - k, huge]),
        ([0, 0, k], [k, k, huge - k]),
    ];
    for x in 0..k {
        for y in 0..k {
            for z in 0..k {
                v.push(([x, y, z], [1, 1, 1]));
            }
        }
    }
    (v, [huge; 3])
}

/// Random guillotine splits of a cube of `side` into about `n` boxes, some of which are
/// then cut into five in a pinwheel (a non-guillotine cut, across two random axes) or
/// into two layers of crossed slabs.
pub fn random_splits3(n: usize, side: u64, seed: u64) -> (Boxes3, [u64; 3]) {
    random_splits3_of(n, [side; 3], seed)
}

/// [`random_splits3`] of the box `[0, extent)`.
pub fn random_splits3_of(n: usize, extent: [u64; 3], seed: u64) -> (Boxes3, [u64; 3]) {
    let mut s = seed | 1;
    let mut v: Boxes3 = vec![([0; 3], extent)];
    let mut i = 0;
    let mut tries = 0;
    while v.len() < n && tries < 20 * n {
        tries += 1;
        let at = i % v.len();
        let a = (next(&mut s) % 3) as usize;
        i += 7;
        cut_box(&mut v, at, a, &mut s);
    }
    let mut out = Vec::new();
    for (o, sh) in v {
        let a = (next(&mut s) % 3) as usize;
        let (p, q) = ((a + 1) % 3, (a + 2) % 3);
        match next(&mut s) % 4 {
            0 if sh[p] >= 3 && sh[q] >= 3 => {
                // A pinwheel of five across axes p and q.
                let a1 = 1 + next(&mut s) % (sh[p] - 2);
                let a2 = a1 + 1 + next(&mut s) % (sh[p] - a1 - 1);
                let b1 = 1 + next(&mut s) % (sh[q] - 2);
                let b2 = b1 + 1 + next(&mut s) % (sh[q] - b1 - 1);
                let (w, h) = (sh[p], sh[q]);
                for (x, y, dx, dy) in [
                    (0, 0, a2, b1),
                    (a2, 0, w - a2, b2),
                    (a1, b2, w - a1, h - b2),
                    (0, b1, a1, h - b1),
                    (a1, b1, a2 - a1, b2 - b1),
                ] {
                    let (mut bo, mut bs) = (o, sh);
                    bo[p] += x;
                    bo[q] += y;
                    bs[p] = dx;
                    bs[q] = dy;
                    out.push((bo, bs));
                }
            }
            1 if sh[a] >= 2 && (2..=64).contains(&sh[p]) && (2..=64).contains(&sh[q]) => {
                // Two layers across axis a: slabs long in p, then slabs long in q.
                let mid = 1 + next(&mut s) % (sh[a] - 1);
                for j in 0..sh[q] {
                    let (mut bo, mut bs) = (o, sh);
                    bs[a] = mid;
                    bo[q] += j;
                    bs[q] = 1;
                    out.push((bo, bs));
                }
                for j in 0..sh[p] {
                    let (mut bo, mut bs) = (o, sh);
                    bo[a] += mid;
                    bs[a] = sh[a] - mid;
                    bo[p] += j;
                    bs[p] = 1;
                    out.push((bo, bs));
                }
            }
            _ => out.push((o, sh)),
        }
    }
    (out, extent)
}
