//! The lock item as the core states it (`dynamodb_lock_core::item`), and what the core leaves to
//! its runner: new random `guid`s.

use rand::RngCore;

pub use dynamodb_lock_core::item::*;

pub fn new_guid() -> Guid {
    let mut g = [0u8; GUID_LEN];
    rand::thread_rng().fill_bytes(&mut g);
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guids_are_random_and_64_bytes() {
        let (a, b) = (new_guid(), new_guid());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
