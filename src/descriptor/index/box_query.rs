//! Box queries of a level ([`LevelIndex::query_box`]): grids and scanned levels directly,
//! levels of arbitrary boxes by walking their partition (rank 2, and the rank-3 sweep over
//! the corner index) within the cost of a scan, else by the scan itself.

use super::frame::Frame;
use super::*;

impl LevelIndex {
    /// Every child region meeting the global box `[lo, hi)` (inside the enclosing box),
    /// each once and in no particular order, through `f`; returns the number of cells,
    /// buckets, nodes and list entries examined.
    pub fn query_box(&self, b: Boxes<'_>, lo: &[u64], hi: &[u64], f: &mut dyn FnMut(u32)) -> u64 {
        match self {
            LevelIndex::Grid(g) if g.on_regions() => match (lo.first(), hi.first()) {
                (Some(&l), Some(&h)) => g.line_box(b, l, h, f),
                _ => 0,
            },
            LevelIndex::Grid(g) => {
                LevelIndex::grid_box(&g.axes, &g.cuts, &g.cells, g.first, lo, hi, f)
            }
            LevelIndex::Scan { first, count } => {
                for c in b.children(*first, *count) {
                    if b.meets(c, lo, hi) {
                        f(c);
                    }
                }
                u64::from(*count)
            }
            LevelIndex::Tree(t) => {
                let (split, buckets) = (&t.split, &t.buckets);
                // A scan examines every bucket the box covers, or (split tree) up to the
                // whole structure whatever it reports; a walk costs a few point queries
                // per region reported. The walk runs first, within the scan's cost:
                // rank 2 (bucket lists or a split tree) and rank 3 with a split tree.
                let mut walked = 0;
                if lo.iter().zip(hi).any(|(l, h)| l >= h) {
                    return 0;
                }
                // The sweep's axes: 0, 1, 2 at rank 3; at rank 4 and up the axes the
                // level's regions are cut along, when at most three are.
                let frame = match b.rank {
                    3 => Some(Frame::identity(b)),
                    r if r >= 4 => t.cut_axes(b).map(|axes| Frame::project(b, axes, lo)),
                    _ => None,
                };
                if let Some(fr) = frame {
                    let (flo, fhi) = (fr.on_axes(lo), fr.on_axes(hi));
                    let mut hits = Vec::new();
                    if buckets.has_lists() {
                        // The bucket scan first (it finds a box inside one region in its
                        // first bucket, and skips the inside of a huge region), within
                        // `P · (⌊log2 n⌋ + 1)`; past that, the sweep, whose cost is
                        // bounded on any geometry (a scan over buckets is not: boxes
                        // covering many buckets of a few huge regions).
                        let budget = buckets.scan_first_budget();
                        match buckets.query_box_within(b, lo, hi, budget, &mut |r| hits.push(r)) {
                            Some(Ok(v)) => {
                                hits.into_iter().for_each(f);
                                return v;
                            }
                            Some(Err(v)) => walked = v,
                            None => {}
                        }
                        hits.clear();
                    }
                    let budget = if buckets.has_lists() {
                        u64::MAX
                    } else {
                        split.size()
                    };
                    match self.walk_box_3d(fr, t, &flo, &fhi, budget, &mut hits) {
                        Ok(v) => {
                            hits.into_iter().for_each(f);
                            return walked + v;
                        }
                        Err(v) => walked += v,
                    }
                }
                if b.rank == 2 {
                    let budget = buckets.buckets_in(lo, hi).unwrap_or_else(|| split.size());
                    let mut hits = Vec::new();
                    match self.walk_box_2d(Frame::identity(b), lo, hi, budget, &mut hits) {
                        Ok(v) => {
                            hits.into_iter().for_each(f);
                            return v;
                        }
                        Err(v) => walked = v,
                    }
                }
                if !buckets.has_lists() {
                    // A box inside one region costs one point query (bucket lists find
                    // that region first, in the bucket of the box's low corner).
                    let (r, visits) = split.find_counting(b, lo);
                    walked += visits;
                    if let Some(r) = r {
                        if b.holds(r, lo, hi) {
                            f(r);
                            return walked;
                        }
                    }
                }
                walked
                    + match buckets.query_box(b, lo, hi, f) {
                        Some(v) => v,
                        None => split.query_box(b, lo, hi, f),
                    }
            }
        }
    }

    /// Box query of a rank-2 level by walking its partition, for levels whose index is
    /// not a grid: the regions meeting `[lo, hi)` are pushed to `hits`, each once, and
    /// the entries examined returned — or, as `Err`, what was examined when that
    /// exceeded `budget` (`hits` is then incomplete).
    ///
    /// Every region `r` meeting the box has a low corner in it, `c(r) = max(r.lo, lo)`.
    /// The walk visits points column by column: the left edge `x = lo.x` from `lo.y` up,
    /// and for every region reported the line just right of it (`x = r.hi.x`, over `r`'s
    /// rows inside the box). On a line it steps from one region's top to the next
    /// region (`y = s.hi.y`), so it visits every region crossing that stretch of line at
    /// its lowest point there. A region is reported where the visited point is its
    /// `c(r)`: for `c(r).x > lo.x` the point left of `c(r)` lies in a region `s` with
    /// `s.hi.x = c(r).x` that contains row `c(r).y` and is reported first (its corner is
    /// further left), so `s`'s line reaches `c(r)`. Each step is one point query; the
    /// steps of a line are the regions touching one side of one region, and those
    /// side-by-side pairs in a partition of the plane number at most a few per region:
    /// the walk makes O(k) point queries for k regions reported, on any geometry.
    fn walk_box_2d(
        &self,
        fr: Frame<'_>,
        lo: &[u64],
        hi: &[u64],
        budget: u64,
        hits: &mut Vec<u32>,
    ) -> std::result::Result<u64, u64> {
        let mut visits = 0u64;
        self.walk_plane(fr, lo, hi, |x, y| [x, y], budget, &mut visits, &mut |r| {
            hits.push(r)
        })?;
        Ok(visits)
    }

    /// The walk of [`walk_box_2d`](Self::walk_box_2d) over the box `[lo, hi)` on axes 0
    /// and 1, its points `at(x, y)` (a plane of a rank-3 level at rank 3): each region met
    /// goes to `found` once, from the point of its clipped low corner; `visits` counts the
    /// entries examined. `Err(visits)` past `budget`, or where a point query finds no
    /// region holding the point (the boxes do not partition the level after all: let the
    /// scan answer).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn walk_plane<const N: usize>(
        &self,
        fr: Frame<'_>,
        lo: &[u64],
        hi: &[u64],
        at: impl Fn(u64, u64) -> [u64; N],
        budget: u64,
        visits: &mut u64,
        found: &mut impl FnMut(u32),
    ) -> std::result::Result<(), u64> {
        // Lines still to walk: x and the rows [y0, y1). At most one per region reported.
        let mut lines = vec![(lo[0], lo[1], hi[1])];
        while let Some((x, y0, y1)) = lines.pop() {
            let mut y = y0;
            while y < y1 {
                let p = at(x, y);
                let (r, v) = fr.find(self, &p);
                *visits += v;
                if *visits > budget {
                    return Err(*visits);
                }
                let Some(r) = r else {
                    return Err(*visits);
                };
                if fr.lo(r, 0).max(lo[0]) == x && fr.lo(r, 1).max(lo[1]) == y {
                    found(r);
                    if fr.hi(r, 0) < hi[0] {
                        lines.push((fr.hi(r, 0), y, fr.hi(r, 1).min(hi[1])));
                    }
                }
                y = fr.hi(r, 1);
            }
        }
        Ok(())
    }

    /// Box query of a rank-3 split-tree level by sweeping its partition down axis 2: the
    /// regions meeting `[lo, hi)` are pushed to `hits`, each once, and the entries
    /// examined returned — or, as `Err`, what was examined when that exceeded `budget` or
    /// the boxes turned out not to partition the level (`hits` is then incomplete).
    ///
    /// Every region `r` meeting the box `Q` has the low corner `c(r) = max(r.lo, lo)` of
    /// its intersection with `Q` on axes 0 and 1. *Top layer*: the regions meeting `Q` that
    /// contain the plane `z = hi.z − 1` (axis 2) cut that plane, inside `Q`, into a
    /// partition of the rectangle `Q.xy`, which the rank-2 walk
    /// ([`walk_box_2d`](Self::walk_box_2d)) enumerates with at most `4 k_top + 1` point
    /// queries (at `z = hi.z − 1`). *Below*: a region `r` meeting `Q` with
    /// `r.hi.z < hi.z` has `lo.z < r.hi.z`, so the point `(c(r), r.hi.z)` lies in `Q`, in a
    /// region `B` that meets `Q`; `B.lo.z = r.hi.z` exactly (`B` holds no point of `r`), so
    /// `lo.z < B.lo.z`, and `c(r)` lies in `R = (B ∩ Q).xy`. Call `r` a child of `B`:
    /// every region meeting `Q` is in the top layer or the child of exactly one region
    /// (the one holding `(c(r), r.hi.z)`), and conversely every region `r` with
    /// `r.hi.z = B.lo.z` whose `c(r)` lies in `R` meets `Q` and is `B`'s child. So the
    /// query reports the top layer, then, for each region `B` reported with
    /// `lo.z < B.lo.z`, its children — each region once, no set of seen regions.
    ///
    /// The children of `B`, `h = B.lo.z`, by where their low corner lies against `R`'s:
    /// - `r.lo.xy >= R.lo` on both axes: `r.lo.xy` lies in `R`; the regions ending at `h`
    ///   with their low corner in a rectangle are [`Corners::report`]'s answer, at most
    ///   `2 · (k_B + 2) · (L + 1) + k_B + 1` nodes and `4 · (⌊log2 n⌋ + 2)` probes for `k_B`
    ///   of them.
    /// - `r.lo.x < R.lo.x`: then `c(r).x = R.lo.x = lo.x`, so `r` holds the segment
    ///   `x = lo.x, z = h − 1` at `y = c(r).y`: a walk of point queries up that segment
    ///   over `R`'s rows, stepping to the top of each region met, meets it. Every region
    ///   met there holds a point `(lo.x, y, h − 1)` with `(lo.x, y)` in `R`, so it ends at
    ///   `h` (the point above is `B`'s) and has `c(r)` in `R` — a child — but for the first
    ///   when it starts below `R.lo.y > lo.y`: at most `k_B + 1` point queries.
    /// - `r.lo.y < R.lo.y` and `r.lo.x >= R.lo.x`: likewise along `y = lo.y` (then
    ///   `R.lo.y = lo.y`) over `R`'s columns, at most `k_B + 1` point queries.
    ///
    /// Every region reported is one `B` at most, so over all, for `k` regions reported:
    /// at most `(4k + 1) + 2k + 2k = 8k + 1` point queries, and per region reported one
    /// corner report, `O((k_B + 1) · log n)` entries — `O((k + 1) · (P + log n))` entries
    /// with `P` the point-query bound (`O(log³ n)` for a rank-3 split tree), whatever the
    /// geometry ([`LevelIndexProbe::box_bound`] states it exactly). The regions the box
    /// misses cost nothing but through `P`. Memory: the hits, and the regions whose
    /// children are still to find (at most `k`).
    fn walk_box_3d(
        &self,
        fr: Frame<'_>,
        t: &TreeLevel,
        lo: &[u64],
        hi: &[u64],
        budget: u64,
        hits: &mut Vec<u32>,
    ) -> std::result::Result<u64, u64> {
        let mut visits = 0u64;
        // Regions reported that start above the box's floor: their children are to find.
        let mut parents: Vec<u32> = Vec::new();
        let (x0, y0, z0) = (lo[0], lo[1], lo[AZ]);
        // Top layer: the planar walk in the plane z = top (the box is not empty, checked by
        // the caller: hi.z >= 1).
        let top = hi[AZ] - 1;
        self.walk_plane(
            fr,
            lo,
            hi,
            |x, y| [x, y, top],
            budget,
            &mut visits,
            &mut |r| {
                hits.push(r);
                if fr.lo(r, AZ) > z0 {
                    parents.push(r);
                }
            },
        )?;
        if parents.is_empty() {
            return Ok(visits);
        }
        let corners = t
            .corners
            .0
            .get_or_init(|| Corners::build(fr, t.region_ids()));
        while let Some(p) = parents.pop() {
            let h = fr.lo(p, AZ);
            // z0 < h: the layer just below `p` lies in the box.
            let z = h - 1;
            let rx = [fr.lo(p, 0).max(x0), fr.hi(p, 0).min(hi[0])];
            let ry = [fr.lo(p, 1).max(y0), fr.hi(p, 1).min(hi[1])];
            let found = |r: u32, hits: &mut Vec<u32>, parents: &mut Vec<u32>| {
                hits.push(r);
                if fr.lo(r, AZ) > z0 {
                    parents.push(r);
                }
            };
            let mut inner = Vec::new();
            visits += corners.report(fr, h, rx, ry, &mut |r| inner.push(r));
            for r in inner {
                found(r, hits, &mut parents);
            }
            // The children starting left of R (R.lo.x = lo.x), then below it (R.lo.y =
            // lo.y): walks along R's left and bottom edges just below p.
            for axis in [0usize, 1] {
                let edge = [rx, ry][axis];
                if edge[0] == lo[axis] {
                    let span = [rx, ry][1 - axis];
                    let mut report = |r| found(r, &mut *hits, &mut parents);
                    self.edge_children(
                        fr,
                        (axis, edge[0]),
                        span,
                        (z, h),
                        lo,
                        budget,
                        &mut visits,
                        &mut report,
                    )?;
                }
            }
            if visits > budget {
                return Err(visits);
            }
        }
        Ok(visits)
    }

    /// The children of a parent region R that start outside its footprint across one of
    /// its edges on the box's floor: point queries at `z` (just below R, whose low z is
    /// `h`) along the edge at `edge.1` on axis `edge.0`, over `span` on the other axis.
    /// Each child ending at `h` whose low corner falls in R's part of the box goes to
    /// `report`. `Err(visits)` past `budget` or where the queries do not tile the edge.
    #[allow(clippy::too_many_arguments)]
    fn edge_children(
        &self,
        fr: Frame<'_>,
        (axis, edge): (usize, u64),
        span: [u64; 2],
        (z, h): (u64, u64),
        lo: &[u64],
        budget: u64,
        visits: &mut u64,
        report: &mut dyn FnMut(u32),
    ) -> std::result::Result<(), u64> {
        let along = 1 - axis;
        let mut at = span[0];
        while at < span[1] {
            let mut q = [0u64; 3];
            q[axis] = edge;
            q[along] = at;
            q[AZ] = z;
            let (r, v) = fr.find(self, &q);
            *visits += v;
            if *visits > budget {
                return Err(*visits);
            }
            let Some(r) = r.filter(|&r| fr.hi(r, AZ) == h) else {
                return Err(*visits);
            };
            let starts_before = fr.lo(r, axis) < edge;
            let other = fr.lo(r, along);
            let found = if axis == 0 {
                // Left of R: its corner is in R when it starts in R's rows, or when R
                // starts at the box's floor on axis 1.
                starts_before && (other >= span[0] || span[0] == lo[1])
            } else {
                // Below R and not left of it (those were the left edge's).
                starts_before && other >= span[0]
            };
            if found {
                report(r);
            }
            at = fr.hi(r, along);
        }
        Ok(())
    }
}
