//! A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), for the
//! large-block pool: what `max_memory_reserved()` becomes for a sequence of allocations.
//!
//! The rules that matter for the reserved figure, as PyTorch 2.x implements them:
//! - requests are rounded up to 512 bytes;
//! - a request with no cached free block large enough gets a new segment from cudaMalloc:
//!   20 MiB for requests of 1-10 MiB, otherwise the request rounded up to 2 MiB;
//! - the smallest cached free block that fits is used (best fit), and split when more than
//!   1 MiB would remain; otherwise the whole block is handed out;
//! - freed blocks merge with free neighbours of the same segment; segments are never returned
//!   to the driver during a step (only `empty_cache()` or an OOM retry does that).
//! - requests of 1 MiB or less are served from a separate pool of 2 MiB segments.

use super::units::MIB;

const SMALL_REQUEST: u64 = MIB;
const LARGE_BUFFER: u64 = 20 * MIB;
const MIN_LARGE_ALLOC: u64 = 10 * MIB;
const ROUND_LARGE: u64 = 2 * MIB;

#[derive(Clone, Copy, Debug)]
struct Block {
    segment: u32,
    offset: u64,
    size: u64,
    /// the tensor this block holds, or `FREE`
    owner: u32,
    /// requests of 1 MiB or less live in their own pool of 2 MiB segments
    small: bool,
}

const FREE: u32 = u32::MAX;

/// Allocator state: blocks kept ordered by (segment, offset).
#[derive(Clone, Debug, Default)]
pub struct CachingAllocator {
    blocks: Vec<Block>,
    segments: u32,
    expandable: bool,
    pub allocated: u64,
    pub reserved: u64,
    pub peak_allocated: u64,
    pub peak_reserved: u64,
}

pub fn round_request(bytes: u64) -> u64 {
    bytes.max(512).div_ceil(512) * 512
}

fn segment_size(request: u64) -> u64 {
    if request <= SMALL_REQUEST {
        2 * MIB
    } else if request < MIN_LARGE_ALLOC {
        LARGE_BUFFER
    } else {
        request.div_ceil(ROUND_LARGE) * ROUND_LARGE
    }
}

impl CachingAllocator {
    pub fn new() -> Self {
        Self::default()
    }

    /// `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`: the large pool is one virtual range
    /// that grows at its end, so free neighbours always merge and a request that does not fit
    /// maps only what the free tail lacks, in 2 MiB pages.
    pub fn expandable() -> Self {
        CachingAllocator {
            expandable: true,
            ..Self::default()
        }
    }

    /// Allocates a tensor of `bytes` for `owner`; returns the bytes the block really takes.
    pub fn alloc(&mut self, owner: u32, bytes: u64) -> u64 {
        let size = round_request(bytes);
        let small = size <= SMALL_REQUEST;
        let index = match self.best_fit(size, small) {
            Some(i) => i,
            None => self.grow(size),
        };
        let block = self.blocks[index];
        let taken = if block.size - size > SMALL_REQUEST {
            size
        } else {
            block.size
        };
        if taken < block.size {
            let rest = Block {
                offset: block.offset + taken,
                size: block.size - taken,
                ..block
            };
            self.blocks.insert(index + 1, rest);
        }
        self.blocks[index] = Block {
            size: taken,
            owner,
            ..block
        };
        self.allocated += taken;
        self.peak_allocated = self.peak_allocated.max(self.allocated);
        taken
    }

    /// Frees every block `owner` holds (no-op for an unknown owner).
    pub fn free(&mut self, owner: u32) {
        let Some(i) = self.blocks.iter().position(|b| b.owner == owner) else {
            return;
        };
        self.allocated -= self.blocks[i].size;
        self.blocks[i].owner = FREE;
        if i + 1 < self.blocks.len() && self.mergeable(i, i + 1) {
            self.blocks[i].size += self.blocks[i + 1].size;
            self.blocks.remove(i + 1);
        }
        if i > 0 && self.mergeable(i - 1, i) {
            self.blocks[i - 1].size += self.blocks[i].size;
            self.blocks.remove(i);
        }
    }

    fn mergeable(&self, a: usize, b: usize) -> bool {
        let (x, y) = (&self.blocks[a], &self.blocks[b]);
        x.owner == FREE && y.owner == FREE && x.segment == y.segment
    }

    fn best_fit(&self, size: u64, small: bool) -> Option<usize> {
        let mut best: Option<(u64, usize)> = None;
        for (i, b) in self.blocks.iter().enumerate() {
            if b.owner == FREE
                && b.small == small
                && b.size >= size
                && best.is_none_or(|(s, _)| b.size < s)
            {
                best = Some((b.size, i));
            }
        }
        best.map(|(_, i)| i)
    }

    /// Adds memory from the driver and returns the index of a free block of at least `size`.
    fn grow(&mut self, size: u64) -> usize {
        if self.expandable && size > SMALL_REQUEST {
            return self.grow_expandable(size);
        }
        let seg_size = segment_size(size);
        self.blocks.push(Block {
            segment: self.segments,
            offset: 0,
            size: seg_size,
            owner: FREE,
            small: size <= SMALL_REQUEST,
        });
        self.segments += 1;
        self.add_reserved(seg_size);
        self.blocks.len() - 1
    }

    fn grow_expandable(&mut self, size: u64) -> usize {
        const RANGE: u32 = u32::MAX;
        let tail = self.blocks.iter().rposition(|b| b.segment == RANGE);
        let free_tail = tail.filter(|&i| self.blocks[i].owner == FREE);
        let have = free_tail.map_or(0, |i| self.blocks[i].size);
        let extra = (size - have).div_ceil(ROUND_LARGE) * ROUND_LARGE;
        self.add_reserved(extra);
        if let Some(i) = free_tail {
            self.blocks[i].size += extra;
            return i;
        }
        let offset = tail.map_or(0, |i| self.blocks[i].offset + self.blocks[i].size);
        let block = Block {
            segment: RANGE,
            offset,
            size: extra,
            owner: FREE,
            small: false,
        };
        let at = tail.map_or(self.blocks.len(), |i| i + 1);
        self.blocks.insert(at, block);
        at
    }

    fn add_reserved(&mut self, bytes: u64) {
        self.reserved += bytes;
        self.peak_reserved = self.peak_reserved.max(self.reserved);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_block_is_reused_and_split() {
        let mut a = CachingAllocator::new();
        a.alloc(1, 100 * MIB);
        a.free(1);
        a.alloc(2, 40 * MIB);
        a.alloc(3, 40 * MIB);
        assert_eq!(a.reserved, 100 * MIB);
        // 20 MiB remain cached but a 30 MiB request needs a new segment
        a.alloc(4, 30 * MIB);
        assert_eq!(a.reserved, 130 * MIB);
        assert_eq!(a.allocated, 110 * MIB);
    }

    #[test]
    fn small_remainders_are_not_split_off() {
        let mut a = CachingAllocator::new();
        // 43 MiB: the segment is rounded to 44 MiB and the 1 MiB left over stays with the tensor
        assert_eq!(a.alloc(1, 43 * MIB), 44 * MIB);
        assert_eq!(a.alloc(2, 5 * MIB), 5 * MIB);
        assert_eq!(a.reserved, 64 * MIB);
    }

    #[test]
    fn expandable_segments_map_only_the_missing_tail() {
        let mut a = CachingAllocator::expandable();
        a.alloc(1, 64 * MIB);
        a.alloc(2, 64 * MIB);
        a.free(1);
        // the freed head and a new tail are one range, but not adjacent: 100 MiB more are mapped
        a.alloc(3, 100 * MIB);
        assert_eq!(a.reserved, 228 * MIB);
        a.free(2);
        a.free(3);
        // everything merged: 228 MiB is reused without mapping more
        a.alloc(4, 200 * MIB);
        assert_eq!(a.reserved, 228 * MIB);
    }

    #[test]
    fn freed_neighbours_merge() {
        let mut a = CachingAllocator::new();
        a.alloc(1, 64 * MIB);
        a.free(1);
        a.alloc(2, 32 * MIB);
        a.alloc(3, 32 * MIB);
        a.free(2);
        a.free(3);
        a.alloc(4, 64 * MIB);
        assert_eq!(a.reserved, 64 * MIB);
    }
}
