//! The ranges registered for offload: the engine sends a chunk to a
//! channel only if every source and destination byte of it lies in one.

use std::sync::RwLock;

/// Registered `[start, end)` ranges, disjoint and sorted by start.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    ranges: RwLock<Vec<(usize, usize)>>,
}

impl Registry {
    /// Adds `[addr, addr + len)`; refuses a range that overlaps one already
    /// there (registering twice would pin twice and unpin once).
    pub(crate) fn add(&self, addr: usize, len: usize) -> Result<(), String> {
        let end = addr
            .checked_add(len)
            .filter(|_| len > 0)
            .ok_or_else(|| format!("range {addr:#x}+{len:#x} is empty or wraps"))?;
        let mut v = self.ranges.write().unwrap_or_else(|e| e.into_inner());
        let i = v.partition_point(|r| r.0 < addr);
        let before = i.checked_sub(1).map(|j| v[j]);
        let after = v.get(i).copied();
        for (s, e) in before.into_iter().chain(after) {
            if s < end && addr < e {
                return Err(format!(
                    "range {addr:#x}+{len:#x} overlaps the registered {s:#x}+{:#x}",
                    e - s
                ));
            }
        }
        v.insert(i, (addr, end));
        Ok(())
    }

    /// Removes exactly the range `add` was given.
    pub(crate) fn remove(&self, addr: usize, len: usize) -> Result<(), String> {
        let mut v = self.ranges.write().unwrap_or_else(|e| e.into_inner());
        match v.iter().position(|&r| r == (addr, addr.wrapping_add(len))) {
            Some(i) => {
                v.remove(i);
                Ok(())
            }
            None => Err(format!(
                "range {addr:#x}+{len:#x} was not registered (unregister takes the exact range registered)"
            )),
        }
    }

    /// Whether every `(addr, len)` lies inside one registered range.
    pub(crate) fn covers(&self, spans: impl IntoIterator<Item = (usize, usize)>) -> bool {
        let v = self.ranges.read().unwrap_or_else(|e| e.into_inner());
        if v.is_empty() {
            return false;
        }
        spans.into_iter().all(|(addr, len)| {
            let i = v.partition_point(|r| r.0 <= addr);
            i > 0 && {
                let (_, e) = v[i - 1];
                addr.checked_add(len).is_some_and(|end| end <= e)
            }
        })
    }

    /// Every registered range, for unregistering them all on drop.
    pub(crate) fn take_all(&self) -> Vec<(usize, usize)> {
        std::mem::take(&mut *self.ranges.write().unwrap_or_else(|e| e.into_inner()))
            .into_iter()
            .map(|(s, e)| (s, e - s))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covers_only_what_lies_inside_one_range() {
        let r = Registry::default();
        assert!(!r.covers([(0x1000, 1)]));
        r.add(0x1000, 0x1000).unwrap();
        r.add(0x3000, 0x1000).unwrap();
        assert!(r.covers([(0x1000, 0x1000), (0x3800, 0x800)]));
        assert!(!r.covers([(0x1800, 0x1000)]), "crosses into a gap");
        assert!(!r.covers([(0x2000, 1)]));
        assert!(!r.covers([(0x3fff, 2)]), "runs off the end");
        assert!(r.covers(std::iter::empty()));
        assert!(r.add(0x1800, 0x1000).is_err(), "overlap refused");
        assert!(r.add(0x0800, 0x1000).is_err(), "overlap refused");
        assert!(r.add(usize::MAX, 2).is_err() && r.add(5, 0).is_err());
        assert!(r.remove(0x1000, 0x800).is_err(), "only the exact range");
        r.remove(0x1000, 0x1000).unwrap();
        assert!(!r.covers([(0x1000, 1)]));
        assert_eq!(r.take_all(), vec![(0x3000, 0x1000)]);
        assert!(!r.covers([(0x3000, 1)]));
    }
}
