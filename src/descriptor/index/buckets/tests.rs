use super::build::{first_overlap, PAIR_LANES, PAIR_ROW};
use super::{Group, StepDiv, GROUP};

/// Numbers below `m` from a xorshift sequence started at `seed`.
fn below(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |m| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    }
}

/// A group places each of its buckets' lists where the counts before it say, with its
/// own count, for every count from 0 to MAX_LIST (the byte sums never carry between
/// lanes) and every element width.
#[test]
fn group_places_each_bucket_list() {
    let mut next = below(0x2545_F491_4F6C_DD1D);
    for round in 0..5000 {
        let counts: [u32; GROUP] = std::array::from_fn(|_| match round % 3 {
            0 => 64,
            1 => next(65) as u32,
            _ => next(4) as u32 * 21,
        });
        let first = next(1 << 32) as u32;
        let g = Group::new(first, &counts);
        for ew in [3usize, 4, 5, 9] {
            let mut at = first as usize;
            for (j, &n) in counts.iter().enumerate() {
                assert_eq!(g.list(j, ew), (at, n as usize), "{counts:?}, bucket {j}");
                at += n as usize * ew;
            }
        }
    }
}

/// The pair test in runs of PAIR_LANES finds the same first overlapping pair as a
/// plain double loop, for every list length up to MAX_LIST and every rank.
#[test]
fn pair_test_runs_find_the_first_overlap() {
    let mut next = below(0x2545_F491_4F6C_DD1D);
    for round in 0..4000 {
        let rank = 1 + round % 4;
        let n = (next(65)) as usize;
        let (mut lo, mut hi) = ([[0i32; PAIR_ROW]; 4], [[0i32; PAIR_ROW]; 4]);
        // Stale spans past the members, as a longer list before would leave them.
        for a in 0..4 {
            for k in 0..PAIR_ROW {
                lo[a][k] = next(4) as i32;
                hi[a][k] = lo[a][k] + 8;
            }
        }
        // Sparse boxes in a wide space, so that many lists have no overlap at all.
        let width = if round % 3 == 0 { 16 } else { 4096 };
        for a in 0..rank {
            for k in 0..n {
                lo[a][k] = next(width) as i32;
                hi[a][k] = lo[a][k] + 1 + next(8) as i32;
            }
            lo[a][n..n + PAIR_LANES].fill(i32::MAX);
            hi[a][n..n + PAIR_LANES].fill(i32::MIN);
        }
        let meet =
            |i: usize, j: usize| (0..rank).all(|a| lo[a][j] < hi[a][i] && lo[a][i] < hi[a][j]);
        let want = (0..n).find_map(|i| (i + 1..n).find(|&j| meet(i, j)).map(|j| (i, j)));
        let got = match rank {
            1 => first_overlap::<1>(&lo, &hi, n),
            2 => first_overlap::<2>(&lo, &hi, n),
            3 => first_overlap::<3>(&lo, &hi, n),
            _ => first_overlap::<4>(&lo, &hi, n),
        };
        assert_eq!(got, want, "rank {rank}, {n} members");
    }
}

#[test]
fn step_division_is_exact() {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut divisors = vec![
        1u64,
        2,
        3,
        7,
        10,
        2971,
        1 << 31,
        (1 << 31) - 1,
        u64::MAX,
        u64::MAX - 1,
    ];
    divisors.extend((0..200).map(|_| next() >> (next() % 64)).filter(|&d| d > 0));
    for d in divisors {
        let f = StepDiv::new(d);
        let mut xs = vec![0u64, 1, d - 1, d, d.wrapping_add(1), u64::MAX, u64::MAX - 1];
        xs.extend((0..200).map(|_| next() >> (next() % 64)));
        xs.extend(
            (1..50u64)
                .filter_map(|k| d.checked_mul(k))
                .flat_map(|v| [v - 1, v]),
        );
        for x in xs {
            assert_eq!(f.div(x), x / d, "{x} / {d}");
            assert_eq!(f.div_rem(x), (x / d, x % d), "{x} / {d}");
        }
    }
}
