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

use crate::units::MIB;

const SMALL_REQUEST: u64 = MIB;
const LARGE_BUFFER: u64 = 20 * MIB;
const MIN_LARGE_ALLOC: u64 = 10 * MIB;
const ROUND_LARGE: u64 = 2 * MIB;

const NIL: u32 = u32::MAX;
const FREE: u32 = u32::MAX;
/// The segment id of the one growing range of `expandable_segments`.
const RANGE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Block {
    segment: u32,
    offset: u64,
    size: u64,
    /// the tensor this block holds, or `FREE`
    owner: u32,
    /// requests of 1 MiB or less live in their own pool of 2 MiB segments
    small: bool,
    /// neighbours in the same segment, in address order
    prev: u32,
    next: u32,
}

/// Where a free block sits in its pool's best-fit order: PyTorch orders free blocks by size,
/// then address; (segment, offset) stands in for the address.
type FitKey = (u64, u32, u64, u32);

/// Allocator state: blocks in an arena linked in address order, free blocks in a sorted list
/// per pool (best fit is a binary search), and each tensor's block by its id.
#[derive(Clone, Debug, Default)]
pub struct CachingAllocator {
    slots: Vec<Block>,
    spare: Vec<u32>,
    free_large: Vec<FitKey>,
    free_small: Vec<FitKey>,
    by_owner: Vec<u32>,
    segments: u32,
    expandable: bool,
    /// the last block of the expandable range
    range_tail: Option<u32>,
    pub allocated: u64,
    pub reserved: u64,
    pub peak_allocated: u64,
    pub peak_reserved: u64,
}

pub fn round_request(bytes: u64) -> u64 {
    bytes.max(512).div_ceil(512) * 512
}

/// What the allocator asks the driver for a rounded request (c10 `get_allocation_size`): 2 MiB for a
/// small one, a 20 MiB buffer under 10 MiB, else the request rounded up to 2 MiB.
pub fn segment_size(request: u64) -> u64 {
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
        let slot = match self.take_best_fit(size, small) {
            Some(slot) => slot,
            None => self.grow(size),
        };
        let block = self.slots[slot as usize];
        let rest = block.size - size;
        let split = if small {
            rest >= 512
        } else {
            rest > SMALL_REQUEST
        };
        let taken = if split { size } else { block.size };
        if split {
            let remainder = Block {
                offset: block.offset + taken,
                size: rest,
                prev: slot,
                ..block
            };
            let r = self.new_slot(remainder);
            if block.next != NIL {
                self.slots[block.next as usize].prev = r;
            }
            self.slots[slot as usize].next = r;
            if self.range_tail == Some(slot) {
                self.range_tail = Some(r);
            }
            self.insert_free(r);
        }
        let b = &mut self.slots[slot as usize];
        b.size = taken;
        b.owner = owner;
        if self.by_owner.len() <= owner as usize {
            self.by_owner.resize(owner as usize + 1, NIL);
        }
        self.by_owner[owner as usize] = slot;
        self.allocated += taken;
        self.peak_allocated = self.peak_allocated.max(self.allocated);
        taken
    }

    /// Frees the block `owner` holds (no-op for an unknown owner).
    pub fn free(&mut self, owner: u32) {
        let Some(&slot) = self.by_owner.get(owner as usize) else {
            return;
        };
        if slot == NIL {
            return;
        }
        self.by_owner[owner as usize] = NIL;
        self.allocated -= self.slots[slot as usize].size;
        self.slots[slot as usize].owner = FREE;
        let mut slot = slot;
        let next = self.slots[slot as usize].next;
        if next != NIL && self.slots[next as usize].owner == FREE {
            self.remove_free(next);
            self.absorb(slot, next);
        }
        let prev = self.slots[slot as usize].prev;
        if prev != NIL && self.slots[prev as usize].owner == FREE {
            self.remove_free(prev);
            self.absorb(prev, slot);
            slot = prev;
        }
        self.insert_free(slot);
    }

    /// Merges block `b` into its left neighbour `a`.
    fn absorb(&mut self, a: u32, b: u32) {
        let gone = self.slots[b as usize];
        let left = &mut self.slots[a as usize];
        left.size += gone.size;
        left.next = gone.next;
        if gone.next != NIL {
            self.slots[gone.next as usize].prev = a;
        }
        if self.range_tail == Some(b) {
            self.range_tail = Some(a);
        }
        self.spare.push(b);
    }

    fn new_slot(&mut self, block: Block) -> u32 {
        match self.spare.pop() {
            Some(s) => {
                self.slots[s as usize] = block;
                s
            }
            None => {
                self.slots.push(block);
                (self.slots.len() - 1) as u32
            }
        }
    }

    fn key(&self, slot: u32) -> FitKey {
        let b = &self.slots[slot as usize];
        (b.size, b.segment, b.offset, slot)
    }

    fn pool(&mut self, small: bool) -> &mut Vec<FitKey> {
        if small {
            &mut self.free_small
        } else {
            &mut self.free_large
        }
    }

    fn insert_free(&mut self, slot: u32) {
        let key = self.key(slot);
        let small = self.slots[slot as usize].small;
        let pool = self.pool(small);
        let at = pool.partition_point(|k| *k < key);
        pool.insert(at, key);
    }

    fn remove_free(&mut self, slot: u32) {
        let key = self.key(slot);
        let small = self.slots[slot as usize].small;
        let pool = self.pool(small);
        let at = pool.partition_point(|k| *k < key);
        pool.remove(at);
    }

    fn take_best_fit(&mut self, size: u64, small: bool) -> Option<u32> {
        let pool = self.pool(small);
        let at = pool.partition_point(|k| k.0 < size);
        (at < pool.len()).then(|| pool.remove(at).3)
    }

    /// Adds memory from the driver and returns a free block of at least `size`, out of the pools.
    fn grow(&mut self, size: u64) -> u32 {
        if self.expandable && size > SMALL_REQUEST {
            return self.grow_expandable(size);
        }
        let seg_size = segment_size(size);
        let block = Block {
            segment: self.segments,
            offset: 0,
            size: seg_size,
            owner: FREE,
            small: size <= SMALL_REQUEST,
            prev: NIL,
            next: NIL,
        };
        self.segments += 1;
        self.add_reserved(seg_size);
        self.new_slot(block)
    }

    fn grow_expandable(&mut self, size: u64) -> u32 {
        let free_tail = self
            .range_tail
            .filter(|&t| self.slots[t as usize].owner == FREE);
        let have = free_tail.map_or(0, |t| self.slots[t as usize].size);
        let extra = (size - have).div_ceil(ROUND_LARGE) * ROUND_LARGE;
        self.add_reserved(extra);
        if let Some(t) = free_tail {
            self.remove_free(t);
            self.slots[t as usize].size += extra;
            return t;
        }
        let (offset, prev) = match self.range_tail {
            Some(t) => (
                self.slots[t as usize].offset + self.slots[t as usize].size,
                t,
            ),
            None => (0, NIL),
        };
        let block = Block {
            segment: RANGE,
            offset,
            size: extra,
            owner: FREE,
            small: false,
            prev,
            next: NIL,
        };
        let slot = self.new_slot(block);
        if prev != NIL {
            self.slots[prev as usize].next = slot;
        }
        self.range_tail = Some(slot);
        slot
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
