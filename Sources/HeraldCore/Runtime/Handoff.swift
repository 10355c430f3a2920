import Synchronization

/// A value moved into a task, not copied: a closure's captures are copies, so an
/// array captured by `Task { ... }` is shared with the capture until the task
/// ends, and the task's first write to it copies every element (with two threads,
/// each batch's envelopes were copied and released once more this way). The
/// closure captures the hand-off instead and takes the value out once.
package final class Handoff<Value: Sendable>: Sendable {
    private let slot: Mutex<Value?>

    package init(_ value: consuming Value) {
        slot = Mutex(Optional(value))
    }

    /// The value, moved out: the hand-off holds nothing afterwards. Taken once.
    package func take() -> Value {
        guard let value = slot.withLock({ $0.take() }) else { preconditionFailure("a hand-off is taken once") }
        return value
    }
}
