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
        let (o, sh) = v[at];
        let a = (next(&mut s) % 2) as usize;
        if sh[a] < 2 {
            i += 1;
            continue;
        }
        let cut = 1 + next(&mut s) % (sh[a] - 1);
        let (mut o2, mut s1, mut s2) = (o, sh, sh);
        s1[a] = cut;
        s2[a] = sh[a] - cut;
        o2[a] += cut;
        v[at] = (o, s1);
        v.push((o2, s2));
        i += 7;
    }
    (v, [side, side])
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
