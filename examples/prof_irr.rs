struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Encode a rank-2 FLOAT32 subpaving of ROW_MAJOR regions given as (origin, shape) boxes.
fn encode(extent: [u64; 2], boxes: &[([u64; 2], [u64; 2])]) -> Vec<u8> {
    let mut b = Vec::with_capacity(64 + boxes.len() * 65);
    b.extend_from_slice(b"TDSC");
    b.extend_from_slice(&[1, 0, 0, 0]);
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&[0x0C, 2, 0x06, 0]);
    for e in extent {
        b.extend_from_slice(&e.to_le_bytes());
    }
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&(boxes.len() as u32).to_le_bytes());
    for (o, s) in boxes {
        for v in o.iter().chain(s) {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&[0x01, 0, 0, 0]);
        b.extend_from_slice(&25u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.push(1);
        b.extend_from_slice(&(s[0] * s[1] * 4).to_le_bytes());
        b.extend_from_slice(&[1, 0, 0, 0, 0, 6, 0, 0]);
    }
    b.push(0);
    let len = b.len() as u64;
    b[8..16].copy_from_slice(&len.to_le_bytes());
    b
}
/// Recursive random splits of `extent` into exactly `n` boxes.
fn irregular(extent: [u64; 2], n: usize, rng: &mut Rng) -> Vec<([u64; 2], [u64; 2])> {
    let mut out = Vec::with_capacity(n);
    let mut stack = vec![([0u64, 0u64], extent, n)];
    while let Some((o, s, k)) = stack.pop() {
        if k == 1 {
            out.push((o, s));
            continue;
        }
        let axis = if s[0] >= s[1] { 0 } else { 1 };
        let k1 = 1 + rng.below(k as u64 - 1) as usize;
        let k1 = (k1 + k / 2) / 2; // keep it roughly balanced but random
        let k1 = k1.clamp(1, k - 1);
        let cut = ((s[axis] as u128 * k1 as u128) / k as u128) as u64;
        let cut = cut.clamp(1, s[axis] - 1);
        let (mut s1, mut s2, mut o2) = (s, s, o);
        s1[axis] = cut;
        s2[axis] = s[axis] - cut;
        o2[axis] += cut;
        stack.push((o, s1, k1));
        stack.push((o2, s2, k - k1));
    }
    out
}
use tensordesc::{decode, Mode};
fn main() {
    let n = 1_000_000;
    let mut rng = Rng(0x9E3779B97F4A7C15);
    let iext = [1u64 << 20, 1u64 << 20];
    let iboxes = irregular(iext, n, &mut rng);
    let ibytes = encode(iext, &iboxes);
    let reps: usize = std::env::var("REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let mut best = f64::MAX;
    for _ in 0..reps {
        let t = std::time::Instant::now();
        let d = decode(&ibytes, Mode::Strict).unwrap();
        best = best.min(t.elapsed().as_secs_f64());
        std::hint::black_box(d);
    }
    println!("decode {:.1} ns/region", best * 1e9 / n as f64);
}
