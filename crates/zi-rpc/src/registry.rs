//! Request ids and capacity (docs/rpc.md#request-ids-and-capacity).

use std::collections::HashSet;

use zi_protocol::errors as messages;

/// Ordinary operations that may be in flight at once.
pub const MAX_ORDINARY: usize = 32;

#[derive(Debug, PartialEq, Eq)]
pub enum AdmitError {
    /// The id is already in flight.
    Duplicate,
    /// No slot; the message is the `capacity` response text.
    Capacity(&'static str),
}

#[derive(Debug, Default)]
pub struct Registry {
    in_flight: HashSet<String>,
    ordinary: usize,
    interrupt_active: bool,
}

impl Registry {
    /// Reserves the id and a slot. Rejections occupy nothing.
    pub fn admit(&mut self, id: &str, is_interrupt: bool) -> Result<(), AdmitError> {
        if self.in_flight.contains(id) {
            return Err(AdmitError::Duplicate);
        }
        if is_interrupt {
            if self.interrupt_active {
                return Err(AdmitError::Capacity(messages::CAPACITY_INTERRUPT));
            }
            self.interrupt_active = true;
        } else {
            if self.ordinary >= MAX_ORDINARY {
                return Err(AdmitError::Capacity(messages::CAPACITY_ORDINARY));
            }
            self.ordinary += 1;
        }
        self.in_flight.insert(id.to_string());
        Ok(())
    }

    /// Frees the id and slot once the response has been written.
    pub fn release(&mut self, id: &str, is_interrupt: bool) {
        if self.in_flight.remove(id) {
            if is_interrupt {
                self.interrupt_active = false;
            } else {
                self.ordinary = self.ordinary.saturating_sub(1);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.in_flight.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thirty_two_ordinary_plus_one_interrupt() {
        let mut registry = Registry::default();
        for i in 0..MAX_ORDINARY {
            assert_eq!(registry.admit(&format!("w{i}"), false), Ok(()));
        }
        assert_eq!(
            registry.admit("w32", false),
            Err(AdmitError::Capacity(messages::CAPACITY_ORDINARY))
        );
        assert_eq!(registry.admit("w32", true), Ok(()));
        assert_eq!(
            registry.admit("i2", true),
            Err(AdmitError::Capacity(messages::CAPACITY_INTERRUPT))
        );
        assert_eq!(registry.admit("w0", true), Err(AdmitError::Duplicate));
        registry.release("w0", false);
        assert_eq!(registry.admit("w0", false), Ok(()));
    }
}
