//! A value a layer above builds from one configuration on first use and keeps as long as the
//! settings live: the rules' dispatch table, the compiled framework table. Settings hold data
//! and name no layer above them, so a slot holds a value of any type; the one layer that fills
//! a slot is the one that reads it back.

use std::any::Any;
use std::sync::OnceLock;

#[derive(Default)]
pub struct Memo(OnceLock<Box<dyn Any + Send + Sync>>);

impl Memo {
    /// The kept value, built by `build` on first use.
    ///
    /// # Panics
    /// If the slot was filled with a value of another type: each slot has one owner.
    pub fn get_or_init<T: Any + Send + Sync>(&self, build: impl FnOnce() -> T) -> &T {
        self.0
            .get_or_init(|| Box::new(build()))
            .downcast_ref()
            .expect("a memo slot is filled and read by one owner, with one type")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_once() {
        let memo = Memo::default();
        assert_eq!(*memo.get_or_init(|| 1u32), 1);
        assert_eq!(*memo.get_or_init(|| 2u32), 1);
    }
}
