//! A generational slab: dense storage with reusable slots and stale-handle detection.
//!
//! Requests and attempts live in slabs. A [`Handle`] is a slot index plus the slot's generation at
//! allocation; freeing a slot bumps its generation, so events that still hold the old handle (a
//! timer of an attempt that was answered, a reply for an attempt that timed out) find out at once
//! that they are stale. This is the engine's lazy cancellation.

/// A reference to a slab slot at one generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Handle {
    /// The slot.
    pub index: u32,
    /// The slot's generation when the handle was made.
    pub generation: u32,
}

#[derive(Clone, Debug)]
struct Slot<T> {
    generation: u32,
    live: bool,
    value: T,
}

/// Dense storage with generations. Freed slots are reused last-in first-out.
#[derive(Clone, Debug)]
pub struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    live: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
        }
    }
}

impl<T> Slab<T> {
    /// An empty slab.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores `value` and returns its handle.
    pub fn insert(&mut self, value: T) -> Handle {
        self.live += 1;
        if let Some(index) = self.free.pop() {
            let slot = &mut self.slots[index as usize];
            slot.live = true;
            slot.value = value;
            Handle {
                index,
                generation: slot.generation,
            }
        } else {
            let index = self.slots.len() as u32;
            self.slots.push(Slot {
                generation: 0,
                live: true,
                value,
            });
            Handle {
                index,
                generation: 0,
            }
        }
    }

    /// The value, if `handle` is still current.
    #[inline]
    pub fn get(&self, handle: Handle) -> Option<&T> {
        match self.slots.get(handle.index as usize) {
            Some(s) if s.live && s.generation == handle.generation => Some(&s.value),
            _ => None,
        }
    }

    /// The value, mutably, if `handle` is still current.
    #[inline]
    pub fn get_mut(&mut self, handle: Handle) -> Option<&mut T> {
        match self.slots.get_mut(handle.index as usize) {
            Some(s) if s.live && s.generation == handle.generation => Some(&mut s.value),
            _ => None,
        }
    }

    /// Whether `handle` is still current.
    #[inline]
    pub fn contains(&self, handle: Handle) -> bool {
        self.get(handle).is_some()
    }

    /// Frees the slot if `handle` is current; every outstanding handle to it becomes stale.
    /// Returns whether it was current.
    pub fn remove(&mut self, handle: Handle) -> bool {
        match self.slots.get_mut(handle.index as usize) {
            Some(s) if s.live && s.generation == handle.generation => {
                s.live = false;
                s.generation = s.generation.wrapping_add(1);
                self.free.push(handle.index);
                self.live -= 1;
                true
            }
            _ => false,
        }
    }

    /// Slots in use.
    pub fn len(&self) -> usize {
        self.live
    }

    /// The largest number of slots ever allocated (the high-water mark of live values).
    pub fn capacity_used(&self) -> usize {
        self.slots.len()
    }

    /// Bytes of one slot (value plus bookkeeping).
    pub const fn slot_bytes() -> usize {
        std::mem::size_of::<Slot<T>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_handles_are_detected_and_slots_reused() {
        let mut s = Slab::new();
        let a = s.insert(1);
        let b = s.insert(2);
        assert_eq!(s.get(a), Some(&1));
        assert!(s.remove(a));
        assert!(!s.remove(a), "double free is refused");
        assert_eq!(s.get(a), None);
        let c = s.insert(3);
        assert_eq!(c.index, a.index, "slot reused");
        assert_ne!(c.generation, a.generation);
        assert_eq!(s.get(a), None, "old handle stays stale");
        assert_eq!(s.get(c), Some(&3));
        assert_eq!(s.get(b), Some(&2));
        assert_eq!(s.len(), 2);
        assert_eq!(s.capacity_used(), 2);
    }
}
